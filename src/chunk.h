/*
** chunk.h -- chunk records, and the set of groups a function belongs to.
**
** A chunk record (pm_Chunk) remembers the environment a chunk was loaded
** with, for its functions that have no _ENV upvalue, its chunk group (the
** "chunks" probe), and its keys for source prefixes (source.h), which put
** every chunk whose path begins with one in a group, whatever its
** environment: a plugin's files, where plugins share _G.  A function's set
** is made here from the three (pm_set_for): this room stands above groups
** and environments (group.h) and source prefixes (source.h), and calls
** both.
*/
#ifndef PM_CHUNK_H
#define PM_CHUNK_H

#include "group.h"
#include "source.h"

typedef struct pm_Chunk {
  int refs; /* keys naming it: its source, or every prototype of its tree */
  int exact; /* named by its prototypes: one load of one chunk */
  const void *root; /* exact: the prototype its tree was keyed from */
  pm_Env *env; /* the environment it was loaded with, or NULL */
  int ambiguous; /* the source is shared by chunks of different envs */
  int unresolved; /* env-less functions were resolved before env known */
  pm_Group *group; /* its chunk group, made while "chunks" is probed */
  /* its keys, made at its first resolution; NULL till then, or unused */
  pm_Path *path[PM_CHUNK_KEYS];
} pm_Chunk;

pm_Chunk *pm_chunk_get (pm_Engine *E, const void *source, int create);
/* The record of the chunk whose root function (a main function, or a
** stripped function of no known tree) has prototype root, keyed by every
** prototype of its tree not keyed yet, which walk(root, f, arg) calls f on
** until f returns 0 (the adapter's pm_proto_walk); NULL when memory ran
** out.  root must not be keyed yet. */
typedef int (*pm_Walk)(const void *root, int (*f)(const void *p, void *arg),
                       void *arg);
pm_Chunk *pm_chunk_tree (pm_Engine *E, const void *root, pm_Walk walk);
void pm_chunk_set_env (pm_Engine *E, pm_Chunk *c, pm_Env *e);
void pm_chunk_forget (pm_Engine *E, pm_Chunk *c);

/* The set of e's groups, those of c's environment when c is exact (a
** function under `local _ENV = M`, or after _ENV was reassigned, stays in
** its chunk's groups), c's chunk group when chunks are probed, and the
** groups of the source prefixes that paths (c's keys, or NULL) begin
** with, the longest prefixes' first: PM_SET_MAX at most; NULL when memory
** ran out.  The keys remember the set (pm_path_note). */
pm_Set *pm_set_for (pm_Engine *E, pm_Env *e, pm_Chunk *c, pm_Path *const *paths,
                    const char *chunkname);

/* Frees every chunk record, then every group, set and environment
** (pm_groups_free) and source prefix (pm_sources_free): all the records
** the engine holds. */
void pm_chunks_free (pm_Engine *E);

#endif
