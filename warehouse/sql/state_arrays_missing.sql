-- Which of the given array digests the warehouse does not hold yet (so only those are written).
SELECT d.digest FROM (SELECT unnest(?::VARCHAR[]) AS digest) d
LEFT JOIN scheduler_state_arrays a USING (digest)
WHERE a.digest IS NULL
