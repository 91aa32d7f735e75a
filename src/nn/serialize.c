/*
 * serialize.c -- the model blob: everything needed to continue training
 * bit-identically in another process, on another machine, or after a crash.
 *
 * Layout (little-endian):
 *
 *   header (32 bytes)
 *     0  magic "MOPMODEL"
 *     8  u32 format version (NN_BLOB_VERSION)
 *    12  u32 header size (32)
 *    16  u64 payload length
 *    24  u64 checksum of the payload
 *   payload
 *     spec: input shape, layers, loss, metric, optimizer and its
 *           hyperparameters, batch size, initializer, seed; from version 2
 *           on the learning-rate schedule (6 four-byte fields: type,
 *           step_size, gamma, min_lr, epochs, warmup), which a version 1
 *           blob lacks and is read as none (a constant rate)
 *     counters: steps, rows trained, epochs, sub-epochs, diverged flag
 *     RNG state (4 x u64): dropout masks and shuffles continue exactly
 *     from version 3 on the class weights of the training loss: i32 count
 *           (0: none, else the model's classes), then that many floats; a
 *           version 1 or 2 blob lacks them and is read as none
 *     (each layer is 12 four-byte fields, from version 4 on 14: its
 *           batchnorm momentum and eps follow; older blobs read them as 0,
 *           so a batchnorm layer in one fails validation)
 *     n_params, n_opt (i64), then the weights and the optimizer state
 *     from version 4 on n_bufs (i64), then the batchnorm running statistics
 *           (each batchnorm layer's running mean, then its running variance)
 *
 * The decoder trusts nothing.  It checks the magic, the version, the
 * declared length against the real one and the checksum before parsing; then
 * every read is bounds-checked, the spec is validated by the same code that
 * validates user input (which caps every dimension and the total size), and
 * the parameter counts implied by the spec must equal those stored and fill
 * the payload exactly; progress counters lie in 0..NN_MAX_COUNTER; class
 * weights are as many as the model's classes, finite and > 0.  Only
 * then is memory allocated.  test/unit/test_fuzz.c fuzzes all of this.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the mop blob codec assumes a little-endian host"
#endif

#define HEADER_SIZE 32
#define SPEC_FIXED_BYTES 88			/* 20 four-byte fields and the seed */
#define SCHED_BYTES (6 * 4)			/* the schedule, version 2 on */
#define LAYER_BYTES (14 * 4)		/* 12 before version 4 (no momentum, eps) */
#define COUNTER_BYTES (4 * 8 + 4)
#define RNG_BYTES (4 * 8)
#define CW_COUNT_BYTES 4			/* the class weights' count, version 3 on */

/* 64-bit checksum: multiply-xor over 8-byte words, then a final avalanche. */
uint64_t
nn_blob_checksum(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t	h = UINT64_C(0xCBF29CE484222325) ^ n;
	size_t		i = 0;

	for (; i + 8 <= n; i += 8)
	{
		uint64_t	w;

		memcpy(&w, p + i, 8);
		h = (h ^ w) * UINT64_C(0x100000001B3);
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * UINT64_C(0x100000001B3);
	h ^= h >> 33;
	h *= UINT64_C(0xFF51AFD7ED558CCD);
	h ^= h >> 33;
	h *= UINT64_C(0xC4CEB9FE1A85EC53);
	h ^= h >> 33;
	return h;
}

/* Bounds-checked sequential reader and writer. */
typedef struct
{
	unsigned char *p;
	size_t		len;
	size_t		pos;
	int			overflow;
} cursor;

static void
put(cursor *c, const void *v, size_t n)
{
	if (c->pos + n > c->len)
	{
		c->overflow = 1;
		return;
	}
	memcpy(c->p + c->pos, v, n);
	c->pos += n;
}

static void
get(cursor *c, void *v, size_t n)
{
	if (c->overflow || n > c->len - c->pos)
	{
		c->overflow = 1;
		memset(v, 0, n);
		return;
	}
	memcpy(v, c->p + c->pos, n);
	c->pos += n;
}

#define PUT(c, x) put((c), &(x), sizeof(x))
#define GET(c, x) get((c), &(x), sizeof(x))

/* Bytes the spec takes in a blob of the current version. */
static size_t
spec_bytes(const nn_spec *s)
{
	return SPEC_FIXED_BYTES + (size_t) s->n_layers * LAYER_BYTES + SCHED_BYTES;
}

/* Write the spec fields one by one (the struct layout is not the format). */
static void
write_spec(cursor *c, const nn_spec *s)
{
	PUT(c, s->in_h);
	PUT(c, s->in_w);
	PUT(c, s->in_c);
	PUT(c, s->n_layers);
	for (int i = 0; i < s->n_layers; i++)
	{
		const nn_layer_spec *l = &s->layers[i];

		PUT(c, l->type);
		PUT(c, l->units);
		PUT(c, l->filters);
		PUT(c, l->kernel_h);
		PUT(c, l->kernel_w);
		PUT(c, l->stride_h);
		PUT(c, l->stride_w);
		PUT(c, l->padding);
		PUT(c, l->activation);
		PUT(c, l->use_bias);
		PUT(c, l->rate);
		PUT(c, l->alpha);
		PUT(c, l->momentum);
		PUT(c, l->eps);
	}
	PUT(c, s->loss);
	PUT(c, s->metric);
	PUT(c, s->top_k);
	PUT(c, s->optimizer);
	PUT(c, s->lr);
	PUT(c, s->momentum);
	PUT(c, s->nesterov);
	PUT(c, s->beta1);
	PUT(c, s->beta2);
	PUT(c, s->eps);
	PUT(c, s->rho);
	PUT(c, s->l2);
	PUT(c, s->weight_decay);
	PUT(c, s->clip_norm);
	PUT(c, s->batch_size);
	PUT(c, s->init);
	PUT(c, s->seed);
	PUT(c, s->lr_schedule);
	PUT(c, s->lr_step_size);
	PUT(c, s->lr_gamma);
	PUT(c, s->lr_min);
	PUT(c, s->lr_epochs);
	PUT(c, s->lr_warmup);
}

/*
 * Read a spec of a blob of format version; NN_ERR_CORRUPT if the layer count
 * is impossible.
 */
static nn_status
read_spec(cursor *c, uint32_t version, nn_spec *s, nn_error *err)
{
	memset(s, 0, sizeof(*s));
	GET(c, s->in_h);
	GET(c, s->in_w);
	GET(c, s->in_c);
	GET(c, s->n_layers);
	if (s->n_layers < 1 || s->n_layers > NN_MAX_LAYERS)
		return nn_fail(err, NN_ERR_CORRUPT, "blob declares %d layers (limit %d)",
					   s->n_layers, NN_MAX_LAYERS);
	for (int i = 0; i < s->n_layers; i++)
	{
		nn_layer_spec *l = &s->layers[i];

		GET(c, l->type);
		GET(c, l->units);
		GET(c, l->filters);
		GET(c, l->kernel_h);
		GET(c, l->kernel_w);
		GET(c, l->stride_h);
		GET(c, l->stride_w);
		GET(c, l->padding);
		GET(c, l->activation);
		GET(c, l->use_bias);
		GET(c, l->rate);
		GET(c, l->alpha);
		if (version >= 4)
		{
			GET(c, l->momentum);
			GET(c, l->eps);
		}
	}
	GET(c, s->loss);
	GET(c, s->metric);
	GET(c, s->top_k);
	GET(c, s->optimizer);
	GET(c, s->lr);
	GET(c, s->momentum);
	GET(c, s->nesterov);
	GET(c, s->beta1);
	GET(c, s->beta2);
	GET(c, s->eps);
	GET(c, s->rho);
	GET(c, s->l2);
	GET(c, s->weight_decay);
	GET(c, s->clip_norm);
	GET(c, s->batch_size);
	GET(c, s->init);
	GET(c, s->seed);
	if (version >= 2)
	{
		GET(c, s->lr_schedule);
		GET(c, s->lr_step_size);
		GET(c, s->lr_gamma);
		GET(c, s->lr_min);
		GET(c, s->lr_epochs);
		GET(c, s->lr_warmup);
	}
	if (c->overflow)
		return nn_fail(err, NN_ERR_CORRUPT, "blob ends inside the model specification");
	return NN_OK;
}

/* Exact size of m's blob. */
size_t
nn_model_blob_size(const nn_model *m)
{
	return HEADER_SIZE + spec_bytes(&m->spec) + COUNTER_BYTES + RNG_BYTES +
		CW_COUNT_BYTES + (size_t) m->n_class_w * sizeof(float) + 16 +
		(size_t) (m->plan.n_params + m->plan.n_opt) * sizeof(float) +
		8 + (size_t) m->plan.n_bufs * sizeof(float);
}

/* Serialize m into buf (cap bytes); *len receives the size written. */
nn_status
nn_model_serialize(const nn_model *m, void *buf, size_t cap, size_t *len,
				   nn_error *err)
{
	size_t		need = nn_model_blob_size(m);
	cursor		c = {buf, cap, HEADER_SIZE, 0};
	uint32_t	version = NN_BLOB_VERSION,
				hsize = HEADER_SIZE;
	uint64_t	plen,
				sum;
	int64_t		np = m->plan.n_params,
				no = m->plan.n_opt,
				nb = m->plan.n_bufs;

	if (m->streaming)
		return nn_fail(err, NN_ERR_STATE, "cannot serialize a model in the middle of a training stream");
	if (!buf || cap < need)
		return nn_fail(err, NN_ERR_INVALID, "blob buffer of %zu bytes is smaller than the %zu needed",
					   cap, need);
	write_spec(&c, &m->spec);
	PUT(&c, m->steps);
	PUT(&c, m->rows_trained);
	PUT(&c, m->epochs);
	PUT(&c, m->sub_epochs);
	PUT(&c, m->diverged);
	put(&c, m->rng, RNG_BYTES);
	PUT(&c, m->n_class_w);
	if (m->n_class_w > 0)
		put(&c, m->class_w, (size_t) m->n_class_w * sizeof(float));
	PUT(&c, np);
	PUT(&c, no);
	put(&c, m->params, (size_t) np * sizeof(float));
	put(&c, m->opt, (size_t) no * sizeof(float));
	PUT(&c, nb);
	if (nb > 0)
		put(&c, m->bufs, (size_t) nb * sizeof(float));
	if (c.overflow || c.pos != need)
		return nn_fail(err, NN_ERR_INVALID, "internal error: blob size mismatch");

	plen = need - HEADER_SIZE;
	sum = nn_blob_checksum((unsigned char *) buf + HEADER_SIZE, plen);
	memcpy(buf, NN_BLOB_MAGIC, 8);
	memcpy((char *) buf + 8, &version, 4);
	memcpy((char *) buf + 12, &hsize, 4);
	memcpy((char *) buf + 16, &plen, 8);
	memcpy((char *) buf + 24, &sum, 8);
	if (len)
		*len = need;
	return NN_OK;
}

/*
 * Check the header and (when verify) the checksum; on success the payload
 * is [32, len) and *version_out its format version.
 */
static nn_status
check_header(const unsigned char *b, size_t len, bool verify, uint32_t *version_out,
			 nn_error *err)
{
	uint32_t	version,
				hsize;
	uint64_t	plen,
				sum;

	if (!b)
		return nn_fail(err, NN_ERR_INVALID, "no blob given");
	if (memcmp(b, NN_BLOB_MAGIC, len < 8 ? len : 8) != 0)
		return nn_fail(err, NN_ERR_MAGIC, "not a mop model (bad magic number)");
	if (len < HEADER_SIZE)
		return nn_fail(err, NN_ERR_TRUNCATED, "blob of %zu bytes is shorter than the %d-byte header",
					   len, HEADER_SIZE);
	memcpy(&version, b + 8, 4);
	memcpy(&hsize, b + 12, 4);
	memcpy(&plen, b + 16, 8);
	memcpy(&sum, b + 24, 8);
	if (version == 0 || version > NN_BLOB_VERSION)
		return nn_fail(err, NN_ERR_VERSION,
					   "model format version %u is not supported (this build reads versions 1..%d)",
					   version, NN_BLOB_VERSION);
	if (hsize != HEADER_SIZE)
		return nn_fail(err, NN_ERR_CORRUPT, "blob header size %u is not %d", hsize, HEADER_SIZE);
	if (plen > len - HEADER_SIZE)
		return nn_fail(err, NN_ERR_TRUNCATED,
					   "blob is truncated: header declares %llu payload bytes, %zu present",
					   (unsigned long long) plen, len - HEADER_SIZE);
	if (plen < len - HEADER_SIZE)
		return nn_fail(err, NN_ERR_CORRUPT, "blob has %zu trailing bytes after its payload",
					   (size_t) (len - HEADER_SIZE - plen));
	if (verify && nn_blob_checksum(b + HEADER_SIZE, plen) != sum)
		return nn_fail(err, NN_ERR_CHECKSUM, "blob checksum mismatch: the model is corrupted");
	*version_out = version;
	return NN_OK;
}

/*
 * Decode header and spec, leaving the cursor after the spec; *version_out
 * (if not NULL) receives the blob's format version.  Without verify the
 * checksum is not computed (the reads stay bounds-checked).
 */
static nn_status
decode_spec(const void *blob, size_t len, bool verify, cursor *c, nn_spec *spec,
			nn_plan *plan, uint32_t *version_out, nn_error *err)
{
	nn_status	s;
	nn_error	inner;
	uint32_t	version = 0;

	if ((s = check_header(blob, len, verify, &version, err)) != NN_OK)
		return s;
	if (version_out)
		*version_out = version;
	c->p = (unsigned char *) blob;
	c->len = len;
	c->pos = HEADER_SIZE;
	c->overflow = 0;
	if ((s = read_spec(c, version, spec, err)) != NN_OK)
		return s;
	if (nn_plan_build(spec, plan, &inner) != NN_OK)
		return nn_fail(err, NN_ERR_CORRUPT, "blob holds an invalid model: %s", inner.msg);
	return NN_OK;
}

/* Read only the validated spec out of a blob. */
nn_status
nn_blob_spec(const void *blob, size_t len, nn_spec *spec, nn_error *err)
{
	cursor		c;
	nn_plan    *plan = malloc(sizeof(nn_plan));
	nn_status	s;

	if (!plan)
		return nn_fail(err, NN_ERR_NOMEM, "out of memory");
	s = decode_spec(blob, len, true, &c, spec, plan, NULL, err);
	free(plan);
	return s;
}

/* Decode a blob into a new model; verify: compute its checksum. */
static nn_status
deserialize(const void *blob, size_t len, bool verify, nn_model **out, nn_error *err)
{
	cursor		c;
	nn_spec		spec;
	nn_plan    *plan = malloc(sizeof(nn_plan));
	nn_model   *m;
	int64_t		steps,
				rows,
				epochs,
				subs,
				np,
				no,
				nb = 0;
	int32_t		diverged,
				n_cw = 0,
				classes;
	uint64_t	rng[4];
	float	   *cw = NULL;
	uint32_t	version;
	nn_status	s;

	*out = NULL;
	if (!plan)
		return nn_fail(err, NN_ERR_NOMEM, "out of memory");
	s = decode_spec(blob, len, verify, &c, &spec, plan, &version, err);
	if (s != NN_OK)
	{
		free(plan);
		return s;
	}
	GET(&c, steps);
	GET(&c, rows);
	GET(&c, epochs);
	GET(&c, subs);
	GET(&c, diverged);
	get(&c, rng, RNG_BYTES);
	classes = nn_plan_n_classes(&spec, plan);
	if (version >= 3)
	{
		GET(&c, n_cw);
		/* bounded before anything is allocated: 0 or the model's classes */
		if (!c.overflow && n_cw != 0)
		{
			if (n_cw != classes)
				s = nn_fail(err, NN_ERR_CORRUPT, "blob holds %d class weights for a model of %d classes",
							n_cw, classes);
			else if ((size_t) n_cw * sizeof(float) > len - c.pos)
				s = nn_fail(err, NN_ERR_CORRUPT, "blob ends inside its class weights");
			else if (!(cw = malloc((size_t) n_cw * sizeof(float))))
				s = nn_fail(err, NN_ERR_NOMEM, "out of memory");
			else
			{
				get(&c, cw, (size_t) n_cw * sizeof(float));
				s = nn_class_weights_check(cw, n_cw, classes, NN_ERR_CORRUPT, err);
			}
		}
	}
	GET(&c, np);
	GET(&c, no);
	if (s != NN_OK)
		;
	else if (c.overflow)
		s = nn_fail(err, NN_ERR_CORRUPT, "blob ends inside its counters");
	else if (steps < 0 || rows < 0 || epochs < 0 || subs < 0 || steps > NN_MAX_COUNTER ||
			 rows > NN_MAX_COUNTER || epochs > NN_MAX_COUNTER || subs > NN_MAX_COUNTER ||
			 (diverged != 0 && diverged != 1))
		s = nn_fail(err, NN_ERR_CORRUPT, "blob has impossible progress counters");
	else if (np != plan->n_params || no != plan->n_opt)
		s = nn_fail(err, NN_ERR_CORRUPT,
					"blob stores %lld parameters and %lld optimizer values, its model needs %lld and %lld",
					(long long) np, (long long) no, (long long) plan->n_params,
					(long long) plan->n_opt);
	else if (version < 4 && plan->n_bufs != 0)
		s = nn_fail(err, NN_ERR_CORRUPT, "blob of format version %u holds batchnorm layers", version);
	else if ((uint64_t) (len - c.pos) != (uint64_t) (np + no) * sizeof(float) +
			 (version >= 4 ? 8 + (uint64_t) plan->n_bufs * sizeof(float) : 0))
		s = nn_fail(err, NN_ERR_CORRUPT, "blob payload length does not match its model");
	else if (version >= 4)
	{
		/* the running statistics' count follows the weights and optimizer state */
		memcpy(&nb, (const unsigned char *) blob + c.pos + (size_t) (np + no) * sizeof(float),
			   sizeof(nb));
		if (nb != plan->n_bufs)
			s = nn_fail(err, NN_ERR_CORRUPT,
						"blob stores %lld running statistics, its model needs %lld",
						(long long) nb, (long long) plan->n_bufs);
	}
	free(plan);
	if (s != NN_OK)
	{
		free(cw);
		return s;
	}

	if ((s = nn_model_alloc_for_blob(&spec, &m, err)) != NN_OK)
	{
		free(cw);
		return s;
	}
	if (n_cw > 0 && (s = nn_model_set_class_weights(m, cw, n_cw, err)) != NN_OK)
	{
		free(cw);
		nn_model_free(m);
		return s;
	}
	free(cw);
	get(&c, m->params, (size_t) np * sizeof(float));
	get(&c, m->opt, (size_t) no * sizeof(float));
	if (version >= 4)
	{
		GET(&c, nb);
		if (nb > 0)
			get(&c, m->bufs, (size_t) nb * sizeof(float));
	}
	memcpy(m->rng, rng, sizeof(rng));
	m->steps = steps;
	m->rows_trained = rows;
	m->epochs = epochs;
	m->sub_epochs = subs;
	m->diverged = diverged;
	*out = m;
	return NN_OK;
}

nn_status
nn_model_deserialize(const void *blob, size_t len, nn_model **out, nn_error *err)
{
	return deserialize(blob, len, true, out, err);
}

nn_status
nn_model_deserialize_verified(const void *blob, size_t len, nn_model **out, nn_error *err)
{
	return deserialize(blob, len, false, out, err);
}

/*
 * Check a blob's header and spec (verify: its checksum too) and find its
 * completed-epoch counter: the counters follow the spec (steps, rows
 * trained, epochs); *at is the counter's offset, inside the blob.
 */
static nn_status
epochs_counter(const void *blob, size_t len, bool verify, size_t *at, nn_error *err)
{
	cursor		c;
	nn_spec		spec;
	nn_plan    *plan = malloc(sizeof(nn_plan));
	nn_status	s;

	if (!plan)
		return nn_fail(err, NN_ERR_NOMEM, "out of memory");
	s = decode_spec(blob, len, verify, &c, &spec, plan, NULL, err);
	free(plan);
	if (s != NN_OK)
		return s;
	if (c.pos > len || len - c.pos < 3 * sizeof(int64_t))
		return nn_fail(err, NN_ERR_CORRUPT, "blob ends inside its counters");
	*at = c.pos + 2 * sizeof(int64_t);
	return NN_OK;
}

/* The completed-epoch counter of a blob, its checksum not computed. */
nn_status
nn_blob_epochs(const void *blob, size_t len, int64_t *epochs, nn_error *err)
{
	size_t		at;
	nn_status	s = epochs_counter(blob, len, false, &at, err);

	if (s == NN_OK)
		memcpy(epochs, (const unsigned char *) blob + at, sizeof(int64_t));
	return s;
}

/* Set the completed-epoch counter of a blob in place and renew its checksum. */
nn_status
nn_blob_set_epochs(void *blob, size_t len, int64_t epochs, nn_error *err)
{
	nn_status	s;
	uint64_t	sum;
	size_t		at;

	if ((s = epochs_counter(blob, len, true, &at, err)) != NN_OK)
		return s;
	if (epochs < 0 || epochs > NN_MAX_COUNTER)
		return nn_fail(err, NN_ERR_INVALID, "epoch count %lld is out of range",
					   (long long) epochs);
	memcpy((unsigned char *) blob + at, &epochs, sizeof(epochs));
	sum = nn_blob_checksum((unsigned char *) blob + HEADER_SIZE, len - HEADER_SIZE);
	memcpy((unsigned char *) blob + 24, &sum, 8);
	return NN_OK;
}
