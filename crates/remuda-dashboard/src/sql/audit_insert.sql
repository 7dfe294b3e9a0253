-- Record a change made through the dashboard or the API: who ($1, the token's name), how
-- ($2, api or page), what ($3), to what ($4), with what details and outcome ($5).
INSERT INTO remuda.audit (actor, via, action, target, detail) VALUES ($1, $2, $3, $4, $5)
