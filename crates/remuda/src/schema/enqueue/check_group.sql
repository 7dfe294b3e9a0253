-- Refuses a fair-share group as remuda's clients refuse it (names::check_group): empty, over
-- 1 000 bytes, or holding a control character (a tab, a newline), which would break the lists
-- that show it. `what` names the job, run or schedule in the message.
CREATE OR REPLACE FUNCTION remuda.check_group(what text, group_key text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF octet_length(group_key) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION '%: the group must be 1 to 1000 bytes', what
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a group, or NULL for none';
    END IF;
    IF group_key ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '%: the group % contains a control character', what, quote_literal(group_key)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'groups may not contain tabs, newlines or other control characters';
    END IF;
END
$$;
