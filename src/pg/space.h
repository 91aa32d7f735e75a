/* space.h -- search-space expansion (space.c), layer fields included. */
#ifndef MOP_SPACE_H
#define MOP_SPACE_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "search/mop_params.h"

struct SpaceParam;

/* A space described for the numeric search cores (PBT, TPE). */
typedef struct MopSpaceDesc
{
	int			n_keys;			/* top-level keys, in order, each followed */
	char	  **keys;			/* by the layer fields searched inside it */
	bool	   *nested;			/* a layer field ("model[1].units"), not a key */
	char	  **fixed;			/* JSON of a fixed key's value, or NULL */
	int		   *param_of_key;	/* index into params, or -1 for fixed keys */
	int			n_params;
	mop_param  *params;
	char	 ***choices;		/* per CHOICE param: JSON of each choice */
	struct SpaceParam *space;	/* the parsed space (space.c's own) */
} MopSpaceDesc;

extern MopSpaceDesc *mop_space_describe(Jsonb *space);
extern Jsonb *mop_space_config(const MopSpaceDesc *d, const double *x);

extern List *mop_space_grid(Jsonb *space);
extern List *mop_space_random(Jsonb *space, int trials, uint64 seed);

#endif
