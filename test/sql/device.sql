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
-- the aggregates called directly ask mop.device too: the same error
SELECT err($$SELECT mop.train_agg(mop.init_model('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}'), b.x, b.y ORDER BY b.buffer_no)
               FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'blobs')
                AND b.split = 'train' AND b.partition = 0$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS train_agg_refused;
SELECT err($$SELECT mop.eval_agg(mop.init_model('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}'), b.x, b.y ORDER BY b.partition, b.buffer_no)
               FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'blobs')
                AND b.split = 'valid'$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS eval_agg_refused;
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
-- a search too, and its run records the CPU
CREATE TEMP TABLE dev_auto AS
SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 1);
SELECT count(*) = 1 AS one_model, bool_and(d.status = 'done') AS done,
       bool_and(r.options->>'device' = 'cpu') AS run_on_cpu
  FROM dev_auto d JOIN mop.runs r ON r.id = d.run_id;
-- the aggregates called directly quietly train and evaluate on the CPU
SELECT (r).state IS NOT NULL AS agg_trained, (r).rows > 0 AS agg_rows, (r).status = 'ok' AS agg_ok
  FROM (SELECT mop.train_agg(mop.init_model('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}'), b.x, b.y ORDER BY b.buffer_no) AS r
          FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'blobs')
           AND b.split = 'train' AND b.partition = 0) s;
SELECT (r).rows > 0 AS agg_evaluated, (r).loss_sum > 0 AS agg_loss
  FROM (SELECT mop.eval_agg(mop.init_model('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}'), b.x, b.y ORDER BY b.partition, b.buffer_no) AS r
          FROM mop.buffers b WHERE b.dataset_id = (SELECT id FROM mop.datasets WHERE name = 'blobs')
           AND b.split = 'valid') s;
-- 'cpu': the run records the CPU as well
SET mop.device = 'cpu';
CREATE TEMP TABLE dev_cpu AS
SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', epochs => 1, workers => 1);
SELECT count(*) = 1 AS one_model, bool_and(d.status = 'done') AS done,
       bool_and(r.options->>'device' = 'cpu') AS run_on_cpu
  FROM dev_cpu d JOIN mop.runs r ON r.id = d.run_id;
RESET mop.device;
-- GPU settings: memory per process (MB, 0 = no limit) and TF32 (off)
SHOW mop.gpu_memory;
SHOW mop.gpu_tf32;
SET mop.gpu_memory = '512MB';
SHOW mop.gpu_memory;
SELECT err($$SET mop.gpu_memory = -1$$) LIKE '22023: %outside the valid range%' AS negative_rejected;
SHOW mop.gpu_memory;
SET mop.gpu_tf32 = on;
SHOW mop.gpu_tf32;
RESET mop.gpu_memory;
RESET mop.gpu_tf32;
SELECT current_setting('mop.gpu_memory') = '0' AND NOT current_setting('mop.gpu_tf32')::boolean AS reset_to_defaults;
-- no rows (and a NOTICE with the reason) where no GPU is usable
SELECT count(*) AS gpus FROM mop_gpu_devices();
-- device => on the training and search functions: mop.device for that call only
SELECT err($$SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1, device => 'tpu')$$)
       AS bad_device;
SET mop.device = 'gpu';
SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1, device => 'cpu') > 0
       AS cpu_for_this_call;
SHOW mop.device;
CREATE TEMP TABLE dev_arg AS
SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}',
                              epochs => 1, workers => 1, device => 'cpu');
SELECT count(*) = 1 AS one_model, bool_and(d.status = 'done') AS done,
       bool_and(r.options->>'device' = 'cpu') AS run_on_cpu
  FROM dev_arg d JOIN mop.runs r ON r.id = d.run_id;
SHOW mop.device;
-- the other way round: 'gpu' for one call where none is usable is the usual error
SET mop.device = 'cpu';
SELECT err($$SELECT mop_train('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS gpu_arg_refused;
SELECT err($$SELECT * FROM mop_random_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"uniform": [0.001, 0.01]}}', trials => 1, epochs => 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS search_arg_refused;
SELECT err($$SELECT * FROM mop_hyperband('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS hyperband_arg_refused;
SELECT err($$SELECT * FROM mop_asha('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}', 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS asha_arg_refused;
SELECT err($$SELECT * FROM mop_pbt('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.001, 0.01]}', population => 2, epochs => 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS pbt_arg_refused;
SELECT err($$SELECT * FROM mop_tpe('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": {"uniform": [0.001, 0.01]}}', trials => 1, epochs => 1, device => 'gpu')$$)
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS tpe_arg_refused;
SELECT err(format($$SELECT * FROM mop_resume(%s, add => '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.02]}', device => 'gpu')$$,
                  (SELECT max(run_id) FROM dev_arg)))
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS resume_arg_refused;
SELECT err(format($$SELECT * FROM mop_replay(%s, device => 'gpu')$$, (SELECT max(run_id) FROM dev_arg)))
       = '55000: mop.device is ''gpu'' but no GPU is usable' AS replay_arg_refused;
-- after the errors, mop.device is what it was
SHOW mop.device;
-- resume where the argument says, not mop.device, and record it
SET mop.device = 'gpu';
CREATE TEMP TABLE dev_resume AS
SELECT * FROM mop_resume((SELECT max(run_id) FROM dev_arg),
                         add => '{"model": {"layers": [{"type": "dense", "units": 3}]}, "learning_rate": [0.02]}',
                         device => 'cpu');
SELECT count(*) = 2 AS two_models, bool_and(d.status = 'done') AS done,
       bool_and(r.options->>'device' = 'cpu') AS resumed_on_cpu
  FROM dev_resume d JOIN mop.runs r ON r.id = d.run_id;
SET mop.device = 'cpu';
-- 'auto' for one call: the CPU (with a NOTICE), recorded in the run
CREATE TEMP TABLE dev_auto_arg AS
SELECT * FROM mop_grid_search('blobs', '{"model": {"layers": [{"type": "dense", "units": 3}]}}',
                              epochs => 1, workers => 1, device => 'auto');
SELECT bool_and(r.options->>'device' = 'cpu') AS auto_run_on_cpu
  FROM dev_auto_arg d JOIN mop.runs r ON r.id = d.run_id;
RESET mop.device;
