-- device: where training runs (mop.device) and the lazily loaded CUDA part.
-- On a machine without a usable GPU (CI, and this project's build machine)
-- 'gpu' is an error that says why, 'auto' trains on the CPU, and nothing
-- GPU-related is loaded for 'cpu'.
SET client_min_messages = warning;
LOAD 'mop';
SHOW mop.device;
SELECT err($$SET mop.device = 'tpu'$$);
-- no usable GPU here: the GPU library is missing (no nvcc at build time) or
-- finds no device (no driver); either way an error before anything starts
SET mop.device = 'gpu';
SELECT err($$SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1)$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS gpu_refused;
SELECT err($$SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1)$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS search_refused;
-- the detail says why: the library could not be loaded, or what CUDA said
DO $$
DECLARE d text;
BEGIN
  PERFORM mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RAISE WARNING 'detail explains: %', d ~ '^(GPU support is not installed or cannot be loaded: .+|no usable GPU: .+)\.$';
END $$;
SELECT count(*) AS runs_started FROM mop.runs WHERE kind = 'grid' AND started_at > now() - interval '1 second' AND status = 'running';
-- 'auto': a NOTICE and the CPU
SET mop.device = 'auto';
SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1) > 0 AS trained_on_cpu;
RESET mop.device;
-- no rows (and a NOTICE with the reason) where no GPU is usable
SELECT count(*) AS gpus FROM mop_gpu_devices();
