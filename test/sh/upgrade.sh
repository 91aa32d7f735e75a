#!/bin/bash
# upgrade.sh -- ALTER EXTENSION mop UPDATE from 0.1 to 0.2:
#   1. a 0.1 catalog with data (a superuser and two tenants: prepared
#      datasets, a mop_train model, a grid search with hops and epochs, a
#      decision) is upgraded without losing a row, a checkpoint or a
#      prediction, and training goes on (mop_resume adds a model, mop_train
#      makes a new one, identities continue);
#   2. after the upgrade the views are readable by ordinary roles (own rows
#      only) and a tenant can no longer write rows that refer to another
#      role's run or model (0.1 let it: checked before the upgrade), and the
#      upgrade warned about the row 0.1 let in;
#   3. CREATE EXTENSION mop (0.2) and CREATE EXTENSION mop VERSION '0.1' +
#      ALTER EXTENSION mop UPDATE give the same catalog: members, columns,
#      constraints, indexes, policies, views, functions, grants, initial
#      privileges, comments and pg_dump settings.
# Uses its own cluster.  Prints ok / not ok lines.
set -u
cd "$(dirname "$0")"
. ./lib_cluster.sh
trap "[ -n \"${KEEP:-}\" ] || cluster_cleanup" EXIT
PSQL="psql -X -q -v ON_ERROR_STOP=1 -At"
export PGOPTIONS="-c client_min_messages=warning"
fail() { echo "not ok $1"; cluster_log 30; exit 1; }
UP=mop_upgraded
FRESH=mop_fresh
as() {	# role, then psql arguments: run as that role (SET ROLE) in $UP
	local role=$1; shift
	PGOPTIONS="$PGOPTIONS -c role=$role" $PSQL -d $UP "$@"
}
# "SQLSTATE|message|detail" of a statement that must fail (or "no error")
attempt() {	# role, statement
	as "$1" -c "SELECT err(\$q\$$2\$q\$)"
}

cluster_init "" || { echo "not ok upgrade: cluster did not start"; exit 1; }
$PSQL -d postgres -c "CREATE DATABASE $UP" -c "CREATE DATABASE $FRESH" \
	-c "CREATE ROLE mop_up_alice LOGIN" -c "CREATE ROLE mop_up_bob LOGIN" >/dev/null || fail "upgrade: setup"

# -- 0.1 with data -------------------------------------------------------------
CFG='{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": 0.05, "seed": 1}'
SPACE='{"model": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}], "learning_rate": [0.05, 0.01], "seed": 2}'
$PSQL -d $UP >/dev/null <<SQL || fail "upgrade: filling the 0.1 catalog"
CREATE EXTENSION mop VERSION '0.1';
CREATE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE d text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || '|' || SQLERRM || '|' || d;
END \$\$;
CREATE TABLE pts AS
SELECT (i % 3)::text AS label, sin(i) + (i % 3) AS x, cos(i * 1.3) - (i % 3) AS y
  FROM generate_series(1, 300) i;
GRANT SELECT ON pts TO mop_up_alice, mop_up_bob;
-- the superuser's own dataset and model
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'su_pts', partitions => 2, seed => 3);
SELECT mop_train('su_pts', '$CFG', 2);
SET ROLE mop_up_alice;
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'a_pts', partitions => 2, seed => 1);
SELECT mop_train('a_pts', '$CFG', 3);
SELECT count(*) FROM mop_grid_search('a_pts', '$SPACE', epochs => 2, workers => 2);
-- a decision of her own (adaptive searches write these)
INSERT INTO mop.decisions (run_id, model_id, action, why, reason)
SELECT run_id, id, 'report', 'test', 'written by hand' FROM mop.models WHERE run_id = (SELECT max(id) FROM mop.runs);
RESET ROLE;
SET ROLE mop_up_bob;
SELECT dataset_id FROM mop_prepare('pts', 'label', dataset => 'b_pts', partitions => 2, seed => 2);
SELECT mop_train('b_pts', '$CFG', 1);
RESET ROLE;
SQL
A_RUN=$($PSQL -d $UP -c "SELECT max(id) FROM mop.runs WHERE owner = 'mop_up_alice' AND kind <> 'train'")
A_MODEL=$($PSQL -d $UP -c "SELECT min(id) FROM mop.models WHERE owner = 'mop_up_alice'")
B_DS=$($PSQL -d $UP -c "SELECT id FROM mop.datasets WHERE name = 'b_pts'")
B_RUN=$($PSQL -d $UP -c "SELECT id FROM mop.runs WHERE owner = 'mop_up_bob'")
B_MODEL=$($PSQL -d $UP -c "SELECT id FROM mop.models WHERE owner = 'mop_up_bob'")
[ -n "$A_RUN" ] && [ -n "$A_MODEL" ] && [ -n "$B_RUN" ] && [ -n "$B_MODEL" ] || fail "upgrade: setup made no runs"

# what 0.1 allowed: bob puts a model into alice's run; alice cannot read mop.best
PLANT_MODEL="INSERT INTO mop.models (run_id, dataset_id, config, metric, higher_is_better, status) VALUES ($A_RUN, $B_DS, '{}', 'accuracy', true, 'training')"
PLANT_HOP="INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, finished_at, rows) VALUES ($B_RUN, $A_MODEL, 99, 0, 0, now(), now(), 1)"
r=$(attempt mop_up_bob "$PLANT_MODEL")
[ "$r" = "no error" ] || fail "upgrade: 0.1 refused bob's model in alice's run ($r): is this really 0.1?"
best01=$(attempt mop_up_alice "SELECT count(*) FROM mop.best")
case "$best01" in 42501*) ;; *) fail "upgrade: 0.1 let alice read mop.best ($best01)";; esac
echo "ok upgrade: in 0.1 a tenant can put a model into another's run and cannot read mop.best (what 0.2 fixes)"

# -- the state before ---------------------------------------------------------
SNAP="SELECT (SELECT count(*) FROM mop.datasets) || ' ' || (SELECT count(*) FROM mop.buffers) || ' ' ||
              (SELECT count(*) FROM mop.runs) || ' ' || (SELECT count(*) FROM mop.models) || ' ' ||
              (SELECT count(*) FROM mop.epochs) || ' ' || (SELECT count(*) FROM mop.hops) || ' ' ||
              (SELECT count(*) FROM mop.decisions) || ' ' ||
              (SELECT md5(string_agg(id || ':' || status || ':' || coalesce(md5(state), '-'), ',' ORDER BY id)) FROM mop.models) || ' ' ||
              (SELECT md5(string_agg(md5(x) || md5(y), ',' ORDER BY dataset_id, split, partition, buffer_no)) FROM mop.buffers) || ' ' ||
              (SELECT md5(string_agg(model_id || ':' || epoch || ':' || valid_metric, ',' ORDER BY model_id, epoch)) FROM mop.epochs)"
PRED="SELECT string_agg(mop_predict($A_MODEL, ARRAY[x, y]), ',' ORDER BY i) || ' ' ||
             (SELECT round(loss::numeric, 12) || ' ' || metric || ' ' || rows FROM mop_evaluate($A_MODEL, 'pts'))
        FROM (SELECT row_number() OVER () AS i, x, y FROM pts LIMIT 20) s"
snap_before=$($PSQL -d $UP -c "$SNAP")
pred_before=$(as mop_up_alice -c "$PRED")
ids_before=$($PSQL -d $UP -c "SELECT max(id) FROM mop.models")
[ -n "$pred_before" ] || fail "upgrade: alice cannot predict before the upgrade"

# -- the upgrade --------------------------------------------------------------
PGOPTIONS="-c client_min_messages=warning" $PSQL -d $UP -c "ALTER EXTENSION mop UPDATE" 2>"$CL_DIR/update.err" \
	|| fail "upgrade: ALTER EXTENSION mop UPDATE failed: $(cat "$CL_DIR/update.err")"
v=$($PSQL -d $UP -c "SELECT extversion FROM pg_extension WHERE extname = 'mop'")
[ "$v" = "0.2" ] || fail "upgrade: version after the update is '$v'"
grep -q "WARNING:  mop: 1 rows of mop.models refer to a dataset, run or model of another role" "$CL_DIR/update.err" \
	|| fail "upgrade: no warning about the model 0.1 let in: $(cat "$CL_DIR/update.err")"
echo "ok upgrade: ALTER EXTENSION mop UPDATE went to 0.2 and warned about the row 0.1 let one tenant write into another's run"

snap_after=$($PSQL -d $UP -c "$SNAP")
pred_after=$(as mop_up_alice -c "$PRED")
[ "$snap_before" = "$snap_after" ] || fail "upgrade: the catalog changed: $snap_before / $snap_after"
[ "$pred_before" = "$pred_after" ] || fail "upgrade: predictions or evaluation changed: $pred_before / $pred_after"
echo "ok upgrade: every row, checkpoint, buffer and epoch kept; predictions and mop_evaluate unchanged"

# -- training goes on ---------------------------------------------------------
n=$(as mop_up_alice -c "SELECT count(*) || ' ' || bool_and(status = 'done') FROM mop_resume($A_RUN, add => '{\"model\": [{\"type\": \"dense\", \"units\": 3}], \"learning_rate\": 0.02}')")
[ "$n" = "3 true" ] || fail "upgrade: mop_resume with a new configuration gave '$n'"
m=$(as mop_up_alice -c "SELECT mop_train('a_pts', '$CFG', 1)")
[ -n "$m" ] && [ "$m" -gt "$ids_before" ] || fail "upgrade: new model id '$m' after $ids_before"
planted=$($PSQL -d $UP -c "SELECT epochs_done || ' ' || status FROM mop.models WHERE run_id = $A_RUN AND owner = 'mop_up_bob'")
[ "$planted" = "0 training" ] || fail "upgrade: alice's resume touched bob's model ($planted)"
echo "ok upgrade: mop_resume adds and trains a configuration, mop_train makes model $m (ids continue), the planted model is left alone"

# -- 0.2's grants and policies are in force -----------------------------------
mine=$(as mop_up_alice -c "SELECT (SELECT count(*) FROM mop.best) || ' ' || (SELECT count(*) FROM mop.leaderboard) || ' ' ||
                                  (SELECT count(*) FROM mop.progress) || ' ' ||
                                  (SELECT count(*) FROM mop.best b WHERE b.run_id NOT IN (SELECT id FROM mop.runs))")
want=$($PSQL -d $UP -c "SELECT (SELECT count(DISTINCT run_id) FROM mop.models WHERE owner = 'mop_up_alice' AND best_valid_metric IS NOT NULL) || ' ' ||
                                (SELECT count(*) FROM mop.models WHERE owner = 'mop_up_alice' AND run_id IS NOT NULL) || ' 0 0'")
[ "$mine" = "$want" ] || fail "upgrade: alice's mop.best, leaderboard, progress: '$mine', expected '$want'"
r1=$(attempt mop_up_bob "$PLANT_MODEL")
r2=$(attempt mop_up_bob "$PLANT_HOP")
[ "$r1" = '42501|new row violates row-level security policy for table "models"|' ] || fail "upgrade: bob's model in alice's run: $r1"
[ "$r2" = '42501|new row violates row-level security policy for table "hops"|' ] || fail "upgrade: bob's hop on alice's model: $r2"
echo "ok upgrade: after it, tenants read mop.best/leaderboard/progress (own rows only) and cannot refer to another's run or model"

# -- a fresh 0.2 and an upgraded 0.1 have the same catalog --------------------
CATALOG=$(cat <<'SQL'
WITH ext AS (SELECT * FROM pg_extension WHERE extname = 'mop'),
members AS (SELECT d.classid, d.objid FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
             WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'),
rels AS (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'mop'::regnamespace)
SELECT 'extension ' || extversion || ' schema=' || extnamespace::regnamespace || ' relocatable=' || extrelocatable FROM ext
UNION ALL SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM members
UNION ALL SELECT 'schema mop acl=' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'mop'
UNION ALL SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity
              || ' force=' || c.relforcerowsecurity || ' options=' || coalesce(c.reloptions::text, '')
              || ' acl=' || coalesce(c.relacl::text, '') || ' owner=' || c.relowner::regrole
            FROM pg_class c JOIN rels USING (oid)
UNION ALL SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
              || ' notnull=' || a.attnotnull || ' identity=' || a.attidentity::text || ' storage=' || a.attstorage::text
              || ' default=' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '') || ' acl=' || coalesce(a.attacl::text, '')
            FROM pg_attribute a JOIN rels ON rels.oid = a.attrelid
            LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
           WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = 'mop'::regnamespace
UNION ALL SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index JOIN rels ON rels.oid = indrelid
UNION ALL SELECT 'policy ' || polrelid::regclass || ' ' || polname || ' cmd=' || polcmd::text || ' permissive=' || polpermissive
              || ' roles=' || polroles::regrole[]::text || ' using=' || coalesce(pg_get_expr(polqual, polrelid), '')
              || ' check=' || coalesce(pg_get_expr(polwithcheck, polrelid), '')
            FROM pg_policy JOIN rels ON rels.oid = polrelid
UNION ALL SELECT 'view ' || c.oid::regclass || ' ' || pg_get_viewdef(c.oid) FROM pg_class c JOIN rels USING (oid) WHERE c.relkind = 'v'
UNION ALL SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '')
            FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid WHERE p.prokind <> 'a'
UNION ALL SELECT 'aggregate ' || a.aggfnoid::regprocedure || ' ' || a.aggtransfn || ' ' || a.aggfinalfn || ' '
              || a.aggtranstype::regtype || ' ' || a.aggfinalmodify::text || ' acl=' || coalesce(p.proacl::text, '')
            FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
UNION ALL SELECT 'type ' || t.oid::regtype || ' ' || t.typtype::text || ' acl=' || coalesce(t.typacl::text, '')
            FROM pg_type t JOIN members m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
UNION ALL SELECT 'comment ' || pg_describe_object(classoid, objoid, objsubid) || ': ' || description
            FROM pg_description WHERE objoid IN (SELECT objid FROM members UNION SELECT oid FROM rels)
UNION ALL SELECT 'initprivs ' || pg_describe_object(classoid, objoid, objsubid) || ' ' || initprivs::text
            FROM pg_init_privs WHERE privtype = 'e'
UNION ALL SELECT 'config ' || c::regclass || ' ' || w FROM ext, unnest(extconfig, extcondition) AS u(c, w)
ORDER BY 1;
SQL
)
$PSQL -d $FRESH -c "CREATE EXTENSION mop" >/dev/null || fail "upgrade: CREATE EXTENSION mop (0.2) failed"
$PSQL -d $UP -c "$CATALOG" >"$CL_DIR/catalog.upgraded" || fail "upgrade: catalog query failed"
$PSQL -d $FRESH -c "$CATALOG" >"$CL_DIR/catalog.fresh" || fail "upgrade: catalog query failed"
lines=$(wc -l <"$CL_DIR/catalog.fresh")
if ! diff -u "$CL_DIR/catalog.fresh" "$CL_DIR/catalog.upgraded" >"$CL_DIR/catalog.diff"; then
	head -n 40 "$CL_DIR/catalog.diff"
	fail "upgrade: a fresh 0.2 and an upgraded 0.1 differ"
fi
# (the description covers what the upgrade changes: a policy per table, the
# views' grant, column grants and their initial privileges)
[ "$(grep -c '^policy ' "$CL_DIR/catalog.fresh")" = "7" ] \
	&& grep -q '^relation mop.best kind=v .*options={security_invoker=true} acl={.*,=r/' "$CL_DIR/catalog.fresh" \
	&& grep -q '^initprivs column kind of table mop.runs {=aw/' "$CL_DIR/catalog.fresh" \
	|| fail "upgrade: the catalog description is incomplete ($lines lines)"
echo "ok upgrade: CREATE EXTENSION mop and 0.1 + ALTER EXTENSION mop UPDATE give the same catalog ($lines lines compared)"
