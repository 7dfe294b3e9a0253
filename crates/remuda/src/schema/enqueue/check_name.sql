-- Refuses a kind, queue or worker name as check_name does: empty or blank, over 200 bytes,
-- or holding a control character.
CREATE OR REPLACE FUNCTION remuda.check_name(what text, name text, job text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    prefix text := CASE WHEN job IS NULL THEN '' ELSE 'job ' || job || ': ' END;
BEGIN
    IF name IS NULL OR name ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION '%the % name is empty', prefix, what
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a name of 1 to 200 bytes';
    END IF;
    IF octet_length(name) > 200 THEN
        RAISE EXCEPTION '%the % name is % bytes, over the limit of 200', prefix, what, octet_length(name)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a shorter name';
    END IF;
    IF name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '%the % name % contains a control character', prefix, what, quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'names may not contain tabs, newlines or other control characters';
    END IF;
END
$$;
