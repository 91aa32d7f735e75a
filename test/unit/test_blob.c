/*
 * test_blob.c -- model serialization: round trip, resume equals
 * uninterrupted training, and rejection of every kind of bad blob.
 */
#include "harness.h"
#include "util.h"

#define HDR 32

/* A small CNN + dropout model trained with Adam: exercises all state. */
static nn_model *
trained_model(uint64_t seed, float **xo, float **yo, int *no)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	int			n = 40;
	float	   *x,
			   *y;
	nn_result	r;

	nn_spec_init(&s);
	s.in_h = 5;
	s.in_w = 5;
	s.in_c = 1;
	s.batch_size = 8;
	s.seed = seed;
	add_conv(&s, 3, 3, 1, NN_PAD_SAME, NN_ACT_RELU);
	add_pool(&s, 2, 2, NN_PAD_VALID);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_layer(&s, NN_LAYER_DROPOUT)->rate = 0.25f;
	add_dense(&s, 3, NN_ACT_NONE);
	if (nn_model_create(&s, &m, &err) != NN_OK)
		return NULL;
	x = malloc(sizeof(float) * n * 25);
	y = malloc(sizeof(float) * n);
	fill_uniform(x, n * 25, seed, -1, 1);
	for (int i = 0; i < n; i++)
		y[i] = (float) (i % 3);
	nn_train(m, x, y, n, 1, &r, &err);
	*xo = x;
	*yo = y;
	*no = n;
	return m;
}

/* Serialize into a fresh malloc'd buffer. */
static unsigned char *
to_blob(nn_model *m, size_t *len)
{
	size_t		n = nn_model_blob_size(m);
	unsigned char *b = malloc(n);
	nn_error	err;

	if (nn_model_serialize(m, b, n, len, &err) != NN_OK)
	{
		free(b);
		return NULL;
	}
	return b;
}

/* Recompute the checksum after tampering, so deeper checks are reached. */
static void
reseal(unsigned char *b, size_t len)
{
	uint64_t	plen = len - HDR,
				sum = nn_blob_checksum(b + HDR, plen);

	memcpy(b + 16, &plen, 8);
	memcpy(b + 24, &sum, 8);
}

static nn_status
decode(const unsigned char *b, size_t len, char *msg)
{
	nn_model   *m = NULL;
	nn_error	err = {0};
	nn_status	s = nn_model_deserialize(b, len, &m, &err);

	if (msg)
		strcpy(msg, s ? err.msg : "");
	nn_model_free(m);
	return s;
}

TEST(blob_round_trip)
{
	float	   *x,
			   *y;
	int			n;
	nn_model   *a = trained_model(5, &x, &y, &n),
			   *b;
	size_t		len,
				len2;
	unsigned char *blob = to_blob(a, &len),
			   *blob2;
	nn_error	err;
	float		pa[120],
				pb[120];
	nn_counters ca,
				cb;

	CHECK(blob && len == nn_model_blob_size(a));
	CHECK(memcmp(blob, NN_BLOB_MAGIC, 8) == 0);
	CHECK(nn_model_deserialize(blob, len, &b, &err) == NN_OK);
	blob2 = to_blob(b, &len2);
	CHECK(len2 == len && memcmp(blob, blob2, len) == 0);
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(memcmp(a->opt, b->opt, sizeof(float) * a->plan.n_opt) == 0);
	nn_model_counters(a, &ca);
	nn_model_counters(b, &cb);
	CHECK(ca.steps == cb.steps && ca.steps == 5 && cb.rows_trained == 40 && cb.sub_epochs == 1);
	nn_predict(a, x, 40, pa, &err);
	nn_predict(b, x, 40, pb, &err);
	CHECK(memcmp(pa, pb, sizeof(pa)) == 0);

	{
		nn_spec		s;

		CHECK(nn_blob_spec(blob, len, &s, &err) == NN_OK);
		CHECK(s.n_layers == a->spec.n_layers && s.seed == 5 && s.layers[0].filters == 3);
	}
	nn_model_free(a);
	nn_model_free(b);
	free(blob);
	free(blob2);
	free(x);
	free(y);
}

TEST(resume_equals_uninterrupted)
{
	float	   *x,
			   *y;
	int			n;
	nn_model   *a = trained_model(9, &x, &y, &n),
			   *b,
			   *c;
	size_t		len;
	unsigned char *blob;
	nn_error	err;
	nn_result	r;

	/* b: a copy taken through a blob after the first sub-epoch */
	blob = to_blob(a, &len);
	CHECK(nn_model_deserialize(blob, len, &b, &err) == NN_OK);
	CHECK(nn_model_clone(a, &c, &err) == NN_OK);
	/* three more sub-epochs each, with shuffling and dropout drawing from the RNG */
	for (int e = 0; e < 3; e++)
	{
		CHECK(nn_train(a, x, y, n, 1, &r, &err) == NN_OK);
		CHECK(nn_train(b, x, y, n, 1, &r, &err) == NN_OK);
		CHECK(nn_train(c, x, y, n, 1, &r, &err) == NN_OK);
	}
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(memcmp(a->opt, b->opt, sizeof(float) * a->plan.n_opt) == 0);
	CHECK(memcmp(a->params, c->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(a->steps == b->steps && a->steps == 20);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
	free(blob);
	free(x);
	free(y);
}

TEST(blob_rejects_damage)
{
	float	   *x,
			   *y;
	int			n;
	nn_model   *a = trained_model(3, &x, &y, &n);
	size_t		len;
	unsigned char *blob = to_blob(a, &len),
			   *bad = malloc(len + 8);
	char		msg[NN_ERRMSG_LEN];
	uint32_t	v;

	/* truncation at every interesting length */
	CHECK(decode(blob, 0, msg) == NN_ERR_TRUNCATED);
	CHECK(decode(blob, 7, msg) == NN_ERR_TRUNCATED);
	CHECK(decode(blob, 31, msg) == NN_ERR_TRUNCATED);
	CHECK(decode(blob, HDR, msg) == NN_ERR_TRUNCATED);
	CHECK(decode(blob, len - 1, msg) == NN_ERR_TRUNCATED);
	CHECK(strstr(msg, "truncated") != NULL);
	for (size_t cut = 1; cut < len; cut += 97)
		CHECK(decode(blob, cut, NULL) != NN_OK);

	/* trailing garbage */
	memcpy(bad, blob, len);
	bad[len] = 0;
	CHECK(decode(bad, len + 1, msg) == NN_ERR_CORRUPT);

	/* a flipped bit anywhere in the payload */
	for (size_t pos = HDR; pos < len; pos += 131)
	{
		memcpy(bad, blob, len);
		bad[pos] ^= 0x10;
		CHECK(decode(bad, len, NULL) == NN_ERR_CHECKSUM);
	}

	/* foreign data */
	memcpy(bad, blob, len);
	memcpy(bad, "PGCOPY\n\377", 8);
	CHECK(decode(bad, len, msg) == NN_ERR_MAGIC);
	CHECK(decode((const unsigned char *) "hello", 5, msg) == NN_ERR_MAGIC);

	/* a future format version */
	memcpy(bad, blob, len);
	v = NN_BLOB_VERSION + 1;
	memcpy(bad + 8, &v, 4);
	CHECK(decode(bad, len, msg) == NN_ERR_VERSION);
	CHECK(strstr(msg, "version 5") != NULL);
	v = 0;
	memcpy(bad + 8, &v, 4);
	CHECK(decode(bad, len, msg) == NN_ERR_VERSION);

	/* absurd shapes behind a valid checksum: units of layer 4 (dense) = 2^30 */
	{
		int32_t		huge = 1 << 30,
					layers = 100000,
					neg = -3;
		size_t		dense_units = HDR + 16 + 4 * 56 + 4;

		memcpy(bad, blob, len);
		memcpy(bad + dense_units, &huge, 4);
		reseal(bad, len);
		CHECK(decode(bad, len, msg) == NN_ERR_CORRUPT);
		CHECK(strstr(msg, "units") != NULL);

		memcpy(bad, blob, len);
		memcpy(bad + HDR + 12, &layers, 4);
		reseal(bad, len);
		CHECK(decode(bad, len, msg) == NN_ERR_CORRUPT);

		memcpy(bad, blob, len);
		memcpy(bad + HDR, &neg, 4);		/* input height */
		reseal(bad, len);
		CHECK(decode(bad, len, msg) == NN_ERR_CORRUPT);

		/* a stored parameter count that disagrees with the architecture */
		{
			int64_t		np;
			size_t		off = HDR + 88 + 5 * 56 + 24 + 36 + 32 + 4;	/* after the class weights' count (0) */

			memcpy(bad, blob, len);
			memcpy(&np, bad + off, 8);
			CHECK(np == a->plan.n_params);
			np += 1;
			memcpy(bad + off, &np, 8);
			reseal(bad, len);
			CHECK(decode(bad, len, msg) == NN_ERR_CORRUPT);
		}
	}
	nn_model_free(a);
	free(blob);
	free(bad);
	free(x);
	free(y);
}

TEST(blob_fuzz_never_crashes)
{
	float	   *x,
			   *y;
	int			n;
	nn_model   *a = trained_model(4, &x, &y, &n);
	size_t		len;
	unsigned char *blob = to_blob(a, &len),
			   *bad = malloc(len);
	uint64_t	rng[4];
	int			accepted = 0;

	nn_rng_seed(rng, 1234, 7);
	/* mutate the spec region and reseal: the decoder must reject or accept cleanly */
	for (int it = 0; it < 3000; it++)
	{
		size_t		pos = HDR + nn_rng_below(rng, 88 + 5 * 48 + 36 + 32 + 16);
		nn_status	s;

		memcpy(bad, blob, len);
		bad[pos] = (unsigned char) nn_rng_next(rng);
		if (it % 3 == 0)
			bad[HDR + nn_rng_below(rng, len - HDR)] ^= 1;
		reseal(bad, len);
		s = decode(bad, len, NULL);
		CHECK(s == NN_OK || s == NN_ERR_CORRUPT);
		accepted += s == NN_OK;
	}
	CHECK(accepted < 3000);
	nn_model_free(a);
	free(blob);
	free(bad);
	free(x);
	free(y);
}

TEST(serialize_refuses_small_buffer_and_streaming)
{
	float	   *x,
			   *y;
	int			n;
	nn_model   *a = trained_model(6, &x, &y, &n);
	size_t		need = nn_model_blob_size(a),
				len;
	unsigned char *b = malloc(need);
	nn_error	err;

	CHECK(nn_model_serialize(a, b, need - 1, &len, &err) == NN_ERR_INVALID);
	CHECK(nn_train_begin(a, 0, &err) == NN_OK);
	CHECK(nn_model_serialize(a, b, need, &len, &err) == NN_ERR_STATE);
	CHECK(nn_train_end(a, NULL, &err) == NN_OK);
	CHECK(nn_model_serialize(a, b, need, &len, &err) == NN_OK);
	nn_model_free(a);
	free(b);
	free(x);
	free(y);
}
