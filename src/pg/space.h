/* space.h -- search-space expansion (space.c). */
#ifndef MOP_SPACE_H
#define MOP_SPACE_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

extern List *mop_space_grid(Jsonb *space);
extern List *mop_space_random(Jsonb *space, int trials, uint64 seed);

#endif
