-- What EnvSched's exploitation ranks, beside the predicted variance it starts from (`EnvSched.predict`):
-- `value` is the variance weighed by what a visit may teach (the frontier transfer, the chances that the task's
-- environment learns and that the task can pass, ...), before the similarity penalty and the quota; `moves` is
-- the chance that the task's sandbox's rewards move with training (`blind_env_prior`). NULL for rows written
-- before this migration and for the paper's predictor.
ALTER TABLE predictions ADD COLUMN value DOUBLE;
ALTER TABLE predictions ADD COLUMN moves DOUBLE;
