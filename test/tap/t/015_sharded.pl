# 015_sharded.pl -- preparing a table whose rows already live on the segments
# (mop_prepare(..., segments => ..., source_on_segments => true)).
#
# A coordinator and two segment servers on loopback; each holds some rows of
# a table "shard" (the coordinator's own rows count because 'local' is a
# segment); the coordinator also holds their union, "whole":
#   1. with validation => 0 the sharded dataset has the statistics, labels
#      and rows (as a multiset, to float tolerance) of the union prepared
#      here; each segment's partition holds exactly its own rows;
#   2. with a validation fraction and replicas => 2: the counts, the
#      placement, replicas identical to the original, the validation rows
#      here and none left on the segments, and a deterministic grid search
#      over it keeps the MOP invariants and is reproducible;
#   3. errors: no table or another column type on a segment, partitions not
#      a multiple of the segments, a segment with too few rows, no SELECT
#      on a segment's table; a failure, even after a segment packed its
#      rows, leaves no copy on any segment.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $conf = qq{
max_worker_processes = 16
client_min_messages = warning
log_statement = none
};
my $coord = PostgreSQL::Test::Cluster->new('coord');
my $seg1 = PostgreSQL::Test::Cluster->new('seg1');
my $seg2 = PostgreSQL::Test::Cluster->new('seg2');
for my $n ($coord, $seg1, $seg2)
{
	$n->init;
	$n->append_conf('postgresql.conf', $conf);
	$n->start;
}

sub sq { my ($n, $sql) = @_; return $n->safe_psql('postgres', $sql, timeout => $PostgreSQL::Test::Utils::timeout_default); }

# rows i of [lo, hi]: 3 classes, 8 features that depend on the class
sub rows_sql
{
	my ($lo, $hi) = @_;
	return qq{SELECT i, (i % 3)::int AS label,
	       ARRAY(SELECT ((i % 3) * 0.4 + sin(i * 7 + j) + j * 0.1)::real FROM generate_series(1, 8) j) AS v,
	       (i % 5)::float8 * 2 AS extra
	  FROM generate_series($lo, $hi) i};
}
my $shard_ddl = 'CREATE TABLE shard (i int, label int, v real[], extra float8)';
my $su = sq($coord, 'SELECT current_user');
for my $n ($seg1, $seg2)
{
	sq($n, "CREATE EXTENSION mop; $shard_ddl");
}
sq($seg1, 'INSERT INTO shard ' . rows_sql(1, 2000));
sq($seg2, 'INSERT INTO shard ' . rows_sql(2001, 5000));
sq($coord, qq{
CREATE EXTENSION mop;
CREATE EXTENSION postgres_fdw;
CREATE SERVER seg1 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '@{[$seg1->host]}', port '@{[$seg1->port]}', dbname 'postgres');
CREATE SERVER seg2 FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '@{[$seg2->host]}', port '@{[$seg2->port]}', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER seg1 OPTIONS (user '$su');
CREATE USER MAPPING FOR CURRENT_USER SERVER seg2 OPTIONS (user '$su');
$shard_ddl;
INSERT INTO shard @{[rows_sql(5001, 6500)]};
CREATE TABLE whole AS @{[rows_sql(1, 6500)]};
});

# the rows of a dataset's buffers (one split), decoded, as sorted strings
sub decoded_rows
{
	my ($node, $where, $nf) = @_;
	my $hex = sq($node, qq{SELECT encode(b.x, 'hex') || ':' || encode(b.y, 'hex') FROM mop.buffers b
	                        JOIN mop.datasets d ON d.id = b.dataset_id WHERE $where});
	my @rows;
	for my $line (split /\n/, $hex)
	{
		my ($x, $y) = split /:/, $line;
		my @xs = unpack('f<*', pack('H*', $x));
		my @ys = unpack('f<*', pack('H*', $y));
		for my $r (0 .. $#ys)
		{
			push @rows, [ $ys[$r], @xs[ $r * $nf .. $r * $nf + $nf - 1 ] ];
		}
	}
	return [ sort { join(',', map { sprintf '%.4f', $_ } @$a) cmp join(',', map { sprintf '%.4f', $_ } @$b) } @rows ];
}
sub same_rows
{
	my ($a, $b) = @_;
	return "count $#$a vs $#$b" if @$a != @$b;
	for my $i (0 .. $#$a)
	{
		for my $j (0 .. $#{ $a->[$i] })
		{
			my ($u, $v) = ($a->[$i][$j], $b->[$i][$j]);
			return "row $i value $j: $u vs $v" if abs($u - $v) > 1e-5 * (1 + abs($u));
		}
	}
	return '';
}

# 1. the same dataset as the union prepared here --------------------------------
sq($coord, q{
SELECT 1 FROM mop_prepare('whole', 'label', ARRAY['v'], dataset => 'union', partitions => 3,
                          validation => 0, buffer_rows => 128, seed => 5);
SELECT 1 FROM mop_prepare('shard', 'label', ARRAY['v'], dataset => 'sharded', validation => 0,
                          buffer_rows => 128, seed => 5, segments => ARRAY['seg1', 'seg2', 'local'],
                          source_on_segments => true);
});
is(sq($coord, q{SELECT partitions, train_rows, valid_rows, n_features, labels::text FROM mop.datasets WHERE name = 'sharded'}),
	'3|6500|0|8|["0", "1", "2"]', 'one partition per segment, every row, the labels of the union');
is(sq($coord, q{SELECT count(*) FROM mop.datasets a, mop.datasets b
                 WHERE a.name = 'union' AND b.name = 'sharded'
                   AND (SELECT bool_and(abs(x - y) <= 1e-9 * (1 + abs(x)))
                          FROM unnest(a.feature_mean || a.feature_std, b.feature_mean || b.feature_std) u(x, y))}),
	'1', 'the merged means and deviations are those of the union');
is(sq($coord, q{SELECT string_agg(format('%s:%s', segment, partitions), ' ' ORDER BY segment)
                 FROM mop.segments WHERE dataset = 'sharded'}),
	'local:{2} seg1:{0} seg2:{1}', 'segment s holds partition s');
is(same_rows(decoded_rows($coord, q{d.name = 'union' AND b.split = 'train'}, 8),
	[ sort { join(',', map { sprintf '%.4f', $_ } @$a) cmp join(',', map { sprintf '%.4f', $_ } @$b) }
		@{ decoded_rows($coord, q{d.name = 'sharded' AND b.split = 'train'}, 8) },
		@{ decoded_rows($seg1, q{d.name LIKE 'sharded@%' AND b.split = 'train'}, 8) },
		@{ decoded_rows($seg2, q{d.name LIKE 'sharded@%' AND b.split = 'train'}, 8) } ]),
	'', 'the rows of the partitions are the rows of the union, standardised alike');
is(sq($seg1, q{SELECT sum(rows) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
               WHERE d.name LIKE 'sharded@%'}), '2000', "seg1's partition holds its own 2000 rows");
is(sq($seg2, q{SELECT sum(rows) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
               WHERE d.name LIKE 'sharded@%'}), '3000', "seg2's partition holds its own 3000 rows");
is(sq($coord, q{SELECT sum(rows) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
                WHERE d.name = 'sharded'}), '1500', "this server's partition holds its own 1500 rows");

# columns, numeric features, a regression target
sq($coord, q{SELECT 1 FROM mop_prepare('shard', 'extra', ARRAY['i', 'label'], dataset => 'reg',
                                       validation => 0, seed => 1, segments => ARRAY['seg1', 'seg2', 'local'],
                                       source_on_segments => true);
             SELECT 1 FROM mop_prepare('whole', 'extra', ARRAY['i', 'label'], dataset => 'reg_union',
                                       validation => 0, seed => 1)});
is(sq($coord, q{SELECT a.target_kind, a.train_rows, (SELECT bool_and(abs(x - y) <= 1e-9 * (1 + abs(x)))
                       FROM unnest(a.feature_mean || a.feature_std, b.feature_mean || b.feature_std) u(x, y))
                  FROM mop.datasets a, mop.datasets b WHERE a.name = 'reg' AND b.name = 'reg_union'}),
	'regression|6500|t', 'feature columns and a regression target: the statistics of the union');

# 2. a validation fraction and replicas ------------------------------------------
sq($coord, q{SELECT 1 FROM mop_prepare('shard', 'label', ARRAY['v'], dataset => 'repl', partitions => 6,
                                       validation => 0.2, buffer_rows => 128, seed => 9,
                                       segments => ARRAY['local', 'seg1', 'seg2'], replicas => 2,
                                       source_on_segments => true)});
is(sq($coord, q{SELECT partitions, train_rows, valid_rows FROM mop.datasets WHERE name = 'repl'}),
	'6|5200|1300', 'validation: a fifth of each segment\'s rows (300 + 400 + 600)');
is(sq($coord, q{SELECT string_agg(format('%s:%s', segment, partitions), ' ' ORDER BY segment)
                 FROM mop.segments WHERE dataset = 'repl'}),
	'local:{0,1,4,5} seg1:{0,1,2,3} seg2:{2,3,4,5}', 'k = 2 partitions per segment, and a replica on the next one');
is(sq($coord, q{SELECT sum(rows) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
                WHERE d.name = 'repl' AND b.split = 'valid'}), '1300', 'every validation row is here');
is(sq($seg1, q{SELECT count(*) FROM mop.buffers b JOIN mop.datasets d ON d.id = b.dataset_id
               WHERE d.name LIKE 'repl@%' AND split = 'valid'}), '0', 'and none is left on a segment');
my $md5 = q{SELECT partition, md5(string_agg(md5(x) || md5(y), ',' ORDER BY buffer_no)) FROM mop.buffers b
             JOIN mop.datasets d ON d.id = b.dataset_id WHERE d.name %s AND split = 'train' AND partition IN (%s)
            GROUP BY partition ORDER BY partition};
is(sprintf("%s", sq($seg1, sprintf($md5, "LIKE 'repl\@%'", '0,1'))),
	sq($coord, sprintf($md5, "= 'repl'", '0,1')), "seg1's replicas of the local partitions are identical");
is(sq($seg2, sprintf($md5, "LIKE 'repl\@%'", '2,3')),
	sq($seg1, sprintf($md5, "LIKE 'repl\@%'", '2,3')), "seg2's replicas of seg1's partitions are identical");
is(sq($coord, sprintf($md5, "= 'repl'", '4,5')),
	sq($seg2, sprintf($md5, "LIKE 'repl\@%'", '4,5')), "this server's replicas of seg2's partitions are identical");

my $space = '{"model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 3}]}, "learning_rate": [0.01, 0.003], "batch_size": 32, "seed": 3}';
my @runs;
for (1 .. 2)
{
	push @runs, sq($coord, qq{SELECT DISTINCT run_id FROM mop_grid_search('repl', '$space', epochs => 2,
		deterministic => true, seed => 11)});
}
is(sq($coord, "SELECT status FROM mop.runs WHERE id = $runs[0]"), 'done', 'a grid search over the sharded dataset is done');
is(sq($coord, qq{SELECT count(*) FROM (SELECT model_id, epoch, partition FROM mop.hops WHERE run_id = $runs[0]
                  GROUP BY 1, 2, 3 HAVING count(*) <> 1) x}), '0', 'no partition visited twice in an epoch');
is(sq($coord, "SELECT count(*) FROM mop.hops WHERE run_id = $runs[0]"), 2 * 2 * 6,
	'every model visited every partition in every epoch');
is(sq($coord, "SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $runs[0]"),
	sq($coord, "SELECT string_agg(md5(state), ',' ORDER BY config::text) FROM mop.models WHERE run_id = $runs[1]"),
	'deterministic: the same models again');
cmp_ok(sq($coord, "SELECT max(best_valid_metric) FROM mop.models WHERE run_id = $runs[0]"), '>', 0.6, 'and they learned');

# categorical columns: vocabularies from the counts merged over the segments
my $cat_rows = sub {
	my ($lo, $hi) = @_;
	return qq{SELECT (i % 4 = 0) AS label,
	       (ARRAY['red', 'green', 'blue', 'teal', 'gold'])[1 + (i * 7) % 5] || CASE WHEN i % 997 = 0 THEN '-rare' ELSE '' END AS colour,
	       CASE WHEN i % 11 = 0 THEN NULL ELSE i % 3 = 0 END AS flag,
	       (i % 13)::float8 AS num
	  FROM generate_series($lo, $hi) i};
};
my $cat_ddl = 'CREATE TABLE cats (label boolean, colour text, flag boolean, num float8)';
sq($seg1, "$cat_ddl; INSERT INTO cats " . $cat_rows->(1, 3000));
sq($seg2, "$cat_ddl; INSERT INTO cats " . $cat_rows->(3001, 5000));
sq($coord, "$cat_ddl; INSERT INTO cats " . $cat_rows->(5001, 6000) . "; CREATE TABLE cats_whole AS " . $cat_rows->(1, 6000));
sq($coord, q{SELECT 1 FROM mop_prepare('cats', 'label', ARRAY['colour', 'flag', 'num'], dataset => 'cats_sharded',
                                       validation => 0, seed => 2, max_categories => 6,
                                       segments => ARRAY['seg1', 'seg2', 'local'], source_on_segments => true);
             SELECT 1 FROM mop_prepare('cats_whole', 'label', ARRAY['colour', 'flag', 'num'], dataset => 'cats_union',
                                       validation => 0, seed => 2, max_categories => 6)});
is(sq($coord, q{SELECT a.categories = b.categories, a.n_features, a.n_features = b.n_features,
                       (SELECT bool_and(abs(x - y) <= 1e-9 * (1 + abs(x)))
                          FROM unnest(a.feature_mean || a.feature_std, b.feature_mean || b.feature_std) u(x, y))
                  FROM mop.datasets a, mop.datasets b WHERE a.name = 'cats_sharded' AND b.name = 'cats_union'}),
	't|10|t|t', 'categorical columns: the vocabularies (with the other bucket), width and statistics of the union');
is(same_rows(decoded_rows($coord, q{d.name = 'cats_union' AND b.split = 'train'}, 10),
	[ sort { join(',', map { sprintf '%.4f', $_ } @$a) cmp join(',', map { sprintf '%.4f', $_ } @$b) }
		@{ decoded_rows($coord, q{d.name = 'cats_sharded' AND b.split = 'train'}, 10) },
		@{ decoded_rows($seg1, q{d.name LIKE 'cats_sharded@%' AND b.split = 'train'}, 10) },
		@{ decoded_rows($seg2, q{d.name LIKE 'cats_sharded@%' AND b.split = 'train'}, 10) } ]),
	'', 'and the same one-hot rows');
sq($seg2, 'CREATE TABLE cats_bad (label boolean, colour int, flag boolean, num float8); INSERT INTO cats_bad SELECT true, 1, true, 1 FROM generate_series(1, 5); INSERT INTO cats_bad SELECT false, 1, true, 1 FROM generate_series(1, 5)');
sq($coord, 'CREATE TABLE cats_bad (label boolean, colour text, flag boolean, num float8); INSERT INTO cats_bad SELECT i % 2 = 0, i::text, true, 1 FROM generate_series(1, 10) i');
my ($cret, $cout, $cerr) = $coord->psql('postgres', q{SELECT mop_prepare('cats_bad', 'label', ARRAY['colour', 'flag', 'num'],
	dataset => 'bad', segments => ARRAY['local', 'seg2'], source_on_segments => true)});
like($cerr, qr/feature column "colour" is categorical here but not on segment "seg2"/, 'a column categorical here but numeric on a segment');

# 3. errors -------------------------------------------------------------------------
my $nocopy = sub {
	return sq($seg1, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'bad@%'}) .
		sq($seg2, q{SELECT count(*) FROM mop.datasets WHERE name LIKE 'bad@%'}) .
		sq($coord, q{SELECT count(*) FROM mop.datasets WHERE name = 'bad'});
};
my ($ret, $out, $err);
sq($coord, 'CREATE TABLE only_here (label int, v real[])');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('only_here', 'label', ARRAY['v'], dataset => 'bad',
	segments => ARRAY['seg1', 'local'], source_on_segments => true)});
like($err, qr/segment "seg1": relation "public.only_here" does not exist/, 'a segment without the table is named');
sq($seg2, 'CREATE TABLE other (label text, v real[]); INSERT INTO other SELECT (i % 2)::text, ARRAY[i, 1]::real[] FROM generate_series(1, 10) i');
sq($coord, 'CREATE TABLE other (label int, v real[]); INSERT INTO other SELECT i % 2, ARRAY[i, 1]::real[] FROM generate_series(1, 10) i');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('other', 'label', ARRAY['v'], dataset => 'bad',
	segments => ARRAY['local', 'seg2'], source_on_segments => true)});
like($err, qr/ERROR:  target column "label" has type text on segment "seg2" but integer here/, 'another column type on a segment');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('shard', 'label', ARRAY['v'], dataset => 'bad',
	partitions => 4, segments => ARRAY['local', 'seg1', 'seg2'], source_on_segments => true)});
like($err, qr/partitions \(4\) must be a multiple of the number of segments \(3\)/, 'partitions not a multiple of the segments');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('shard', 'label', ARRAY['v'], dataset => 'bad',
	partitions => 4800, validation => 0, segments => ARRAY['local', 'seg1', 'seg2'], source_on_segments => true)});
like($err, qr/segment "local" has 1500 training rows of public.shard, fewer than its 1600 partitions/,
	'a segment with fewer rows than its partitions is named');
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('shard', 'label', ARRAY['v'], dataset => 'bad',
	source_on_segments => true)});
like($err, qr/source_on_segments needs segments/, 'source_on_segments without segments');
($ret, $out, $err) = $seg1->psql('postgres', q{SELECT mop.shard_stats('shard', 'label', ARRAY['v'], 'class', 0, 1)});
like($err, qr/mop.shard_stats must run inside a transaction block/, 'the segment side: stats outside a transaction block');
($ret, $out, $err) = $seg1->psql('postgres', q{BEGIN; SELECT count(*) FROM mop.shard_stats('shard', 'label', ARRAY['v'], 'class', 0, 1); COMMIT;
                                              BEGIN; SELECT mop.shard_pack(1, 0, 1); COMMIT;});
like($err, qr/no rows were read for a sharded preparation in this transaction/, 'the segment side: pack without stats in its transaction');
($ret, $out, $err) = $seg1->psql('postgres', q{BEGIN; SELECT count(*) FROM mop.shard_stats('shard', 'label', ARRAY['v'], 'class', 0, 1);
                                              UPDATE mop.datasets SET buffer_rows = 2000000000 WHERE name LIKE 'sharded@%';
                                              SELECT mop.shard_pack((SELECT id FROM mop.datasets WHERE name LIKE 'sharded@%'), 0, 1); ROLLBACK;});
like($err, qr/buffers of 2000000000 rows, which cannot be packed/, 'the segment side: an edited dataset row is refused, not packed');
is($nocopy->(), '000', 'no failed preparation left a copy anywhere');

# the mapped role reads the segment's table with its own privileges
sq($seg2, "CREATE ROLE carol LOGIN");
sq($coord, "CREATE ROLE carol LOGIN; GRANT USAGE ON FOREIGN SERVER seg1, seg2 TO carol;
            CREATE USER MAPPING FOR carol SERVER seg2 OPTIONS (user 'carol', password_required 'false');
            GRANT SELECT ON shard TO carol");
($ret, $out, $err) = $coord->psql('postgres', q{SET ROLE carol; SELECT mop_prepare('shard', 'label', ARRAY['v'],
	dataset => 'bad', segments => ARRAY['local', 'seg2'], source_on_segments => true)});
like($err, qr/segment "seg2": permission denied for table (public\.)?shard/, "no SELECT on the segment's table: refused there");
# a failure after seg1 packed its rows (seg2 fails to store its buffers) leaves nothing on seg1
sq($seg2, q{CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS
            $$BEGIN RAISE EXCEPTION 'no space left (a test)'; END$$;
            CREATE TRIGGER refuse BEFORE INSERT ON mop.buffers FOR EACH ROW EXECUTE FUNCTION public.refuse()});
($ret, $out, $err) = $coord->psql('postgres', q{SELECT mop_prepare('shard', 'label', ARRAY['v'],
	dataset => 'bad', segments => ARRAY['seg1', 'seg2'], source_on_segments => true)});
like($err, qr/segment "seg2": no space left \(a test\)/, "seg2 fails to pack after seg1 packed");
is($nocopy->(), '000', 'and seg1 kept nothing');
sq($seg2, 'DROP TRIGGER refuse ON mop.buffers');

done_testing();
