/*
 * lockorder.h -- the order in which mop locks catalog rows, and the checks
 * that refuse to drop what a running run uses.
 *
 * The catalog is a tree: a dataset has runs, a run has models, a model has
 * epochs, hops and decisions (all ON DELETE CASCADE).  A delete locks rows
 * top-down (the dataset's row, then its runs', then their models', then
 * the leaves), so mop's own transactions lock the rows of the upper levels
 * that their writes depend on in the same order:
 *
 *     mop.datasets row  ->  mop.runs row  ->  mop.models rows  ->  leaves
 *
 * Foreign keys lock upward behind one's back: inserting a hop or a
 * decision locks its run's and model's rows FOR KEY SHARE, and a second
 * UPDATE of a row in one transaction re-checks its foreign keys (a worker's
 * last sub-epoch of an epoch updates its model twice, locking the run's
 * and the dataset's rows).  Were they taken while a worker held its
 * model's row lock for a whole sub-epoch, they would wait for a delete
 * that holds the dataset's or the run's row and waits for that model: a
 * deadlock (40P01).  So:
 *   - a worker reads its model's checkpoint without a lock, trains (and
 *     validates, at the end of an epoch), and only then locks the
 *     dataset's row and the run's row FOR KEY SHARE and
 *     the model's FOR UPDATE (re-reading its status), and writes
 *     (subepoch.c): its locks last milliseconds, not a sub-epoch;
 *   - every coordinator transaction locks the dataset's row and then the
 *     run's FOR KEY SHARE before it touches a model or a decision; creating
 *     a run locks the dataset's row first, resuming one the dataset's row
 *     and then the run's (coord_catalog.c, coord_resume.c);
 *   - ending a run goes run -> its unfinished models;
 *   - a delete of a run that trains is refused (55006) by the BEFORE DELETE
 *     trigger on mop.runs once it holds the run's row, whether it is a
 *     DELETE on mop.runs or a cascade from mop.datasets: its models are
 *     never deleted under its workers;
 *   - mop_drop_dataset checks first and refuses at once while a run trains
 *     on the dataset; otherwise it locks the dataset's row FOR UPDATE,
 *     which waits for runs being created or resumed on it, checks again
 *     and deletes;
 *   - DROP EXTENSION mop (an event trigger) refuses while a run trains and
 *     otherwise takes all of mop's relations without ever waiting while
 *     holding one of them (table locks are taken in dependency order,
 *     which no row order can match).
 * FOR KEY SHARE does not conflict with the non-key UPDATEs of statuses and
 * checkpoints, so these locks never slow training down; they only order
 * it against deletes.
 */
#ifndef MOP_LOCKORDER_H
#define MOP_LOCKORDER_H

#include "postgres.h"

/* Is run run_id, whose mop.runs.shm_handle is handle, trained by live processes now? */
extern bool mop_run_is_live(int64 run_id, int64 handle);

/*
 * Row locks in the documented order, inside the caller's SPI connection;
 * each returns false if the row is not there (deleted, or not visible).
 */
extern bool mop_lock_dataset_row(int64 dataset_id);
extern bool mop_lock_dataset_of_run(int64 run_id);
extern bool mop_lock_run_row(int64 run_id);

#endif							/* MOP_LOCKORDER_H */
