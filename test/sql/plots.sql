-- plots: charts of a run as SVG documents, checked as XML
SET client_min_messages = warning;
SELECT mop_prepare('blobs', 'species', ARRAY['a', 'b', 'c'], '<b>&"blobs"', partitions => 2) IS NOT NULL AS prepared;
CREATE TEMP TABLE pr AS
SELECT DISTINCT run_id FROM mop_grid_search('<b>&"blobs"',
  '{"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "learning_rate": [0.01, 0.003, 0.001], "seed": 1}', epochs => 3, workers => 2, deterministic => true);
SELECT run_id AS r FROM pr \gset
CREATE TEMP TABLE svgs AS
SELECT mop_plot_gantt(:r)::xml AS gantt, mop_plot_curves(:r)::xml AS curves,
       mop_plot_curves(:r, y => 'train_loss', x => 'seconds')::xml AS curves_s,
       ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']] AS ns;
-- well-formed SVG documents
SELECT xpath_exists('/s:svg', gantt, ns) AS gantt_svg, xpath_exists('/s:svg', curves, ns) AS curves_svg,
       xpath_exists('/s:svg', curves_s, ns) AS curves_s_svg FROM svgs;
-- one bar per sub-epoch, one lane per worker, one line per model, one point per epoch
SELECT (xpath('count(//s:rect[@class="hop"])', gantt, ns))[1]::text::int
         = (SELECT count(*) FROM mop.hops WHERE run_id = :r) AS bar_per_hop,
       (xpath('count(//s:text[starts-with(., "worker ")])', gantt, ns))[1]::text::int
         = (SELECT count(DISTINCT worker) FROM mop.hops WHERE run_id = :r) AS lane_per_worker,
       (xpath('count(//s:polyline[@class="curve"])', curves, ns))[1]::text::int AS lines,
       (xpath('count(//s:circle[@class="point"])', curves, ns))[1]::text::int
         = (SELECT count(*) FROM mop.epochs e JOIN mop.models m ON m.id = e.model_id WHERE m.run_id = :r) AS point_per_epoch
  FROM svgs;
-- every bar's hover title names its model, epoch and partition
SELECT bool_and(t::text ~ '^model \d+, epoch \d+, partition \d+: \d+ rows in [0-9.]+ s \(worker \d+\)$') AS titles
  FROM svgs, unnest(xpath('//s:rect[@class="hop"]/s:title/text()', gantt, ns)) t;
-- the best model is drawn thickest and named in the legend
SELECT (xpath('count(//s:polyline[@stroke-width="3.5"])', curves, ns))[1]::text AS thick,
       (xpath('count(//s:text[contains(., "(best)")])', curves, ns))[1]::text AS best_in_legend
  FROM svgs;
-- user data is escaped: the dataset's name comes back exactly as given
SELECT (xpath('/s:svg/s:title/text()', gantt, ns))[1]::text LIKE 'run % on &lt;b&gt;&amp;"blobs": %' AS escaped_in_source,
       position('<b>' IN gantt::text) = 0 AS no_raw_markup
  FROM svgs;
-- a run without sub-epochs yet still gives a document
CREATE TEMP TABLE pr2 AS
SELECT DISTINCT run_id FROM mop_grid_search('<b>&"blobs"', '{"model": {"layers": [{"type": "dense", "units": 3}]}}',
                                            epochs => 1, workers => 1, wait => false);
SELECT xpath_exists('/s:svg', mop_plot_gantt(run_id)::xml, ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']]) AS gantt_ok,
       xpath_exists('/s:svg', mop_plot_curves(run_id)::xml, ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']]) AS curves_ok
  FROM pr2;
SELECT mop_wait(run_id) FROM pr2;
-- bad arguments
SELECT err(format($$SELECT mop_plot_curves(%s, y => 'accuracy')$$, :r));
SELECT err(format($$SELECT mop_plot_curves(%s, x => 'minutes')$$, :r));
SELECT err($$SELECT mop_plot_gantt(-1)$$);
SELECT err($$SELECT mop_plot_curves(-1)$$);
-- the optimization history, parallel coordinates and the one-page report
CREATE TEMP TABLE more AS
SELECT mop_plot_history(:r)::xml AS history, mop_plot_parallel(:r)::xml AS parallel, mop_report(:r) AS report,
       ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']] AS ns;
SELECT (xpath('count(//s:circle[@class="trial"])', history, ns))[1]::text::int
         = (SELECT count(*) FROM mop.models WHERE run_id = :r AND status IN ('done', 'stopped', 'diverged')
              AND best_valid_metric IS NOT NULL) AS dot_per_trial,
       xpath_exists('//s:polyline[@class="best-so-far"]', history, ns) AS best_so_far,
       (xpath('count(//s:polyline[@class="trial"])', parallel, ns))[1]::text AS parallel_lines,
       (xpath('count(//s:text[@style="font-weight: bold"])', parallel, ns))[1]::text AS parallel_axes
  FROM more;
-- the report: one HTML document with the four charts inline, nothing fetched
SELECT report LIKE '<!DOCTYPE html><html lang="en">%' AS html,
       xml_is_well_formed_document(substr(report, 16)) AS well_formed,
       (xpath('count(//s:svg)', substr(report, 16)::xml, ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']]))[1]::text AS charts,
       report !~ '(src|href)=' AS self_contained,
       report LIKE '%&lt;b&gt;&amp;"blobs"%' AND report NOT LIKE '%<b>&"blobs"%' AS escaped
  FROM more;
SELECT err($$SELECT mop_plot_history(-1)$$), err($$SELECT mop_plot_parallel(-1)$$), err($$SELECT mop_report(-1)$$);
-- charts only read: they work in a read-only transaction (a standby, a
-- read-only dashboard role) and give the same documents there
BEGIN TRANSACTION READ ONLY;
SELECT mop_plot_gantt(:r) IS NOT NULL AS gantt, mop_plot_curves(:r) IS NOT NULL AS curves,
       mop_plot_history(:r)::xml::text = (SELECT history::text FROM more) AS history_same,
       mop_plot_parallel(:r)::xml::text = (SELECT parallel::text FROM more) AS parallel_same,
       mop_report(:r) LIKE '<!DOCTYPE html>%' AS report;
COMMIT;
-- a run of 1,000 models of 20 epochs (made by hand): the curves stay
-- bounded, the best 300 drawn and no dot per epoch; the others draw
-- every trial
INSERT INTO mop.runs (kind, dataset_id, space, epochs, workers, seed, status, owner, options, started_at, finished_at)
SELECT kind, dataset_id, space, 20, workers, seed, 'done', owner, options, started_at, finished_at
  FROM mop.runs WHERE id = :r RETURNING id AS big \gset
INSERT INTO mop.models (run_id, dataset_id, config, status, epochs_done, metric, higher_is_better,
                        best_valid_metric, best_valid_loss, best_epoch)
SELECT :big, m.dataset_id, jsonb_build_object('learning_rate', i * 1e-4, 'batch_size', 16 << (i % 4)), 'done', 20,
       m.metric, true, 0.5 + 0.4 * sin(i)::numeric(8, 6), 1, 20
  FROM generate_series(1, 1000) i, (SELECT * FROM mop.models WHERE run_id = :r LIMIT 1) m;
INSERT INTO mop.epochs (model_id, epoch, train_loss, train_metric, valid_loss, valid_metric, train_rows, valid_rows, seconds)
SELECT m.id, e, 1.0 / e, 0.5, 1.0 / e, m.best_valid_metric * e / 20, 100, 10, 0.1
  FROM mop.models m, generate_series(1, 20) e WHERE m.run_id = :big;
SELECT octet_length(c) < 1000000 AS curves_bounded,
       (xpath('count(//s:polyline[@class="curve"])', c::xml, ns))[1]::text AS curves,
       (xpath('count(//s:circle)', c::xml, ns))[1]::text AS dots,
       c LIKE '%1000 models (best: model%), the best 300 drawn%' AS says_so,
       c LIKE '%(20000 epochs: no dot per epoch)%' AS says_no_dots,
       (xpath('count(//s:circle[@class="trial"])', mop_plot_history(:big)::xml, ns))[1]::text AS history_trials,
       (xpath('count(//s:polyline[@class="trial"])', mop_plot_parallel(:big)::xml, ns))[1]::text AS parallel_lines
  FROM (SELECT mop_plot_curves(:big) AS c, ARRAY[ARRAY['s', 'http://www.w3.org/2000/svg']] AS ns) x;
