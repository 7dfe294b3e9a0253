-- Refuses a W3C trace context as remuda's clients refuse it (trace.rs): a traceparent not of
-- version 00 (lowercase hex, ids not all zeros), or a tracestate without a traceparent, over
-- 512 bytes or not printable ASCII. `what` names the job or run in the message.
CREATE OR REPLACE FUNCTION remuda.check_trace(what text, traceparent text, tracestate text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       OR traceparent ~ '^00-0{32}-' OR traceparent ~ '-0{16}-[0-9a-f]{2}$' THEN
        RAISE EXCEPTION '%: traceparent % is not a W3C trace context of version 00', what, quote_literal(traceparent)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zeros';
    END IF;
    IF tracestate IS NOT NULL AND (traceparent IS NULL OR octet_length(tracestate) > 512
                                   OR tracestate ~ '[^\x20-\x7e]') THEN
        RAISE EXCEPTION '%: a tracestate needs a traceparent, and at most 512 bytes of printable ASCII', what
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
