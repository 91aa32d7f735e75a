-- options: the search functions' SQL DEFAULTs are the defaults of a run's
-- options in src/pg/run_options.c (mop_run_option_defaults and
-- mop_run_default_trials), which also fill a NULL argument and a key a
-- recorded run lacks; the two must say the same
WITH expected(name, dflt) AS (VALUES
  ('epochs', '10'), ('seed', '0'), ('deterministic', 'false'),
  ('eta', '3'), ('min_resource', '1'), ('max_trials', '20'),
  ('population', '8'), ('interval', '1'), ('quantile', '0.25'),
  ('resample', '0.25'), ('n_startup', '10'), ('gamma', '0.1')),
declared AS (
  SELECT r.routine_name AS fn, p.parameter_name AS name, p.parameter_default AS dflt
    FROM information_schema.routines r
    JOIN information_schema.parameters p USING (specific_schema, specific_name)
   WHERE r.routine_name IN ('mop_grid_search', 'mop_random_search', 'mop_hyperband',
                            'mop_asha', 'mop_pbt', 'mop_tpe')
     AND p.parameter_name IN (SELECT name FROM expected))
SELECT d.fn, d.name, d.dflt AS declared, e.dflt AS run_options_c
  FROM declared d JOIN expected e USING (name)
 WHERE d.dflt IS DISTINCT FROM e.dflt
   AND NOT (d.name = 'max_trials' AND d.fn <> 'mop_asha')
 ORDER BY 1, 2;
-- max_trials is ASHA's number of configurations (default 20); on the other
-- searches it is a cap, NULL (none) unless given
SELECT r.routine_name AS fn, p.parameter_default AS max_trials_default
  FROM information_schema.routines r
  JOIN information_schema.parameters p USING (specific_schema, specific_name)
 WHERE r.routine_name IN ('mop_grid_search', 'mop_random_search', 'mop_hyperband',
                          'mop_asha', 'mop_pbt', 'mop_tpe')
   AND p.parameter_name = 'max_trials'
 ORDER BY 1;
-- every option with a default is an argument of some search function
SELECT e.name AS option_without_argument
  FROM (VALUES ('epochs'), ('seed'), ('deterministic'), ('eta'), ('min_resource'),
               ('max_trials'), ('population'), ('interval'), ('quantile'),
               ('resample'), ('n_startup'), ('gamma')) e(name)
 WHERE NOT EXISTS (SELECT 1 FROM information_schema.parameters p
                    WHERE p.specific_schema = 'public' AND p.parameter_name = e.name
                      AND p.specific_name ~ '^mop_');
-- the count of declared defaults checked, per function
SELECT r.routine_name AS fn, count(*) AS defaults_checked
  FROM information_schema.routines r
  JOIN information_schema.parameters p USING (specific_schema, specific_name)
 WHERE r.routine_name IN ('mop_grid_search', 'mop_random_search', 'mop_hyperband',
                          'mop_asha', 'mop_pbt', 'mop_tpe')
   AND p.parameter_name IN ('epochs', 'seed', 'deterministic', 'eta', 'min_resource',
                            'max_trials', 'population', 'interval', 'quantile',
                            'resample', 'n_startup', 'gamma')
 GROUP BY 1 ORDER BY 1;
