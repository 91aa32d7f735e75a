/*
 * fuzz_gen.c -- writes the cases of the SQL-level fuzzer (test/sh/fuzz.sh):
 * mutated model states and mutated packed buffers, made by the mutation
 * engine of the engine-level fuzzer (fuzz_mut.h), as rows for COPY.
 *
 *   fuzz_gen SEED STATES BUFFERS < seeds.tsv > cases.tsv
 *
 * Input, one seed per line (tab-separated, bytea in hex without "\x"):
 *   S  ref  state                  a valid model state of seed ref
 *   B  ref  buffer_no  features  x  y   a valid buffer pair of seed ref
 * Output, COPY text format:
 *   case_id  kind(state|buffer)  ref  buffer_no  state  x  y  description
 * Case i is drawn from fz_seed_case(seed, i), so it can be regenerated.
 */
#include <ctype.h>

#include "fuzz_mut.h"

#define MAX_SEEDS 64

typedef struct
{
	int			ref;
	unsigned char *b;
	size_t		len;
}			state_seed;

typedef struct
{
	int			ref;
	int			buffer_no;
	int			features;
	unsigned char *x,
			   *y;
	size_t		xlen,
				ylen;
}			buffer_seed;

static int
hexval(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* Decode hex text into a fresh buffer. */
static unsigned char *
unhex(const char *h, size_t *len)
{
	size_t		n = strlen(h) / 2;
	unsigned char *b = malloc(n + 1);

	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char) (hexval(h[2 * i]) << 4 | hexval(h[2 * i + 1]));
	*len = n;
	return b;
}

static void
put_hex(FILE *f, const unsigned char *b, size_t len)
{
	static const char d[] = "0123456789abcdef";

	fputs("\\\\x", f);
	for (size_t i = 0; i < len; i++)
	{
		fputc(d[b[i] >> 4], f);
		fputc(d[b[i] & 15], f);
	}
}

int
main(int argc, char **argv)
{
	static state_seed st[MAX_SEEDS];
	static buffer_seed bu[MAX_SEEDS];
	int			nst = 0,
				nbu = 0;
	uint64_t	seed;
	long		nstates,
				nbuffers;
	size_t		cap = 1 << 20;
	char	   *line = malloc(cap);

	if (argc != 4)
	{
		fprintf(stderr, "usage: fuzz_gen SEED STATES BUFFERS < seeds.tsv > cases.tsv\n");
		return 2;
	}
	seed = strtoull(argv[1], NULL, 10);
	nstates = atol(argv[2]);
	nbuffers = atol(argv[3]);
	while (fgets(line, (int) cap, stdin))
	{
		char	   *f[6];
		int			nf = 0;
		char	   *p = line;

		line[strcspn(line, "\r\n")] = '\0';
		while (nf < 6 && (f[nf] = strsep(&p, "\t")) != NULL)
			nf++;
		if (nf == 3 && f[0][0] == 'S' && nst < MAX_SEEDS)
		{
			st[nst].ref = atoi(f[1]);
			st[nst].b = unhex(f[2], &st[nst].len);
			nst++;
		}
		else if (nf == 6 && f[0][0] == 'B' && nbu < MAX_SEEDS)
		{
			bu[nbu].ref = atoi(f[1]);
			bu[nbu].buffer_no = atoi(f[2]);
			bu[nbu].features = atoi(f[3]);
			bu[nbu].x = unhex(f[4], &bu[nbu].xlen);
			bu[nbu].y = unhex(f[5], &bu[nbu].ylen);
			nbu++;
		}
	}
	if (nst == 0 || nbu == 0)
	{
		fprintf(stderr, "fuzz_gen: no seeds read (%d states, %d buffers)\n", nst, nbu);
		return 1;
	}

	for (long i = 0; i < nstates + nbuffers; i++)
	{
		fz_rng		r;
		char		desc[400] = "";

		fz_seed_case(&r, seed, (uint64_t) i);
		if (i < nstates)
		{
			int			k = (int) fz_below(&r, nst);
			int			o = (k + 1) % nst;
			size_t		wcap = st[k].len + FZ_SLACK + (1 << 20);
			unsigned char *w = malloc(wcap);
			size_t		len;

			memcpy(w, st[k].b, st[k].len);
			len = fz_mutate_blob(&r, w, st[k].len, wcap, st[o].b, st[o].len, desc, sizeof(desc));
			printf("%ld\tstate\t%d\t\\N\t", i, st[k].ref);
			put_hex(stdout, w, len);
			printf("\t\\N\t\\N\t%s\n", desc);
			free(w);
		}
		else
		{
			buffer_seed *b = &bu[fz_below(&r, nbu)];
			size_t		xcap = b->xlen + FZ_SLACK + (size_t) b->features * 16,
						ycap = b->ylen + FZ_SLACK;
			unsigned char *x = malloc(xcap),
					   *y = malloc(ycap);
			size_t		xlen = b->xlen,
						ylen = b->ylen;
			uint64_t	which = fz_below(&r, 3);

			memcpy(x, b->x, xlen);
			memcpy(y, b->y, ylen);
			if (which != 1)
				xlen = fz_mutate_floats(&r, x, xlen, xcap, b->features, 0, desc, sizeof(desc));
			if (which != 0)
				ylen = fz_mutate_floats(&r, y, ylen, ycap, 1, 1, desc, sizeof(desc));
			printf("%ld\tbuffer\t%d\t%d\t\\N\t", i, b->ref, b->buffer_no);
			put_hex(stdout, x, xlen);
			putchar('\t');
			put_hex(stdout, y, ylen);
			printf("\t%s %s\n", which == 0 ? "x:" : which == 1 ? "y:" : "x,y:", desc);
			free(x);
			free(y);
		}
	}
	return 0;
}
