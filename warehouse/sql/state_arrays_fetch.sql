-- The arrays a scheduler-state manifest references.
SELECT digest, dtype, shape, data FROM scheduler_state_arrays WHERE list_contains(?::VARCHAR[], digest)
