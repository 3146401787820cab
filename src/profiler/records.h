/*
** records.h -- what the sampling profiler keeps: functions, stacks and
** samples.  Knows no Lua: sample.c fills them from a walk of the stack,
** lprofiler.c reads them out, tests/engine/records_test.c checks them.
**
** A function is kept once per (source, line defined, name, kind, group);
** a stack is a node of one trie of all stacks seen: its parent (the
** caller's node), its function and the line running there.  Samples go to
** a ring, which grows up to the profiler's limit and then drops the oldest.
** Everything is perfmon's own memory (mem.h), counted in info().bytes.
*/
#ifndef PM_RECORDS_H
#define PM_RECORDS_H

#include "engine.h"
#include "index.h"

#define PM_PROF_SRC 60 /* bytes of a function's source: Lua's LUA_IDSIZE */
#define PM_PROF_NAME 48 /* bytes kept of a function's name */

typedef struct pm_Func { /* a function as samples show it */
  uint32_t hash;
  int line; /* where it is defined; -1 for a C function */
  int group_id; /* its performance group's id, or 0 */
  char what; /* 'L' Lua, 'C' C, 'm' a main chunk */
  char src[PM_PROF_SRC]; /* short_src */
  char name[PM_PROF_NAME]; /* how it was called; "" when Lua cannot tell */
  /* its group's name, copied: a group may die before its samples are read */
  char *group;
} pm_Func;

typedef struct pm_Node { /* a stack: a node of the trie of all stacks seen */
  uint32_t parent; /* index + 1 of the caller's node; 0 for a root */
  uint32_t func;
  int line; /* the site: the line running, -1 for a C function */
  uint32_t hash;
  uint64_t self, total; /* periods with it on the top / on the stack */
} pm_Node;

typedef struct pm_Sample {
  double time_us; /* realtime, the clock of snapshots and alerts */
  uint32_t weight; /* sampling periods it stands for */
  uint32_t node, thread; /* thread: 1 the main thread, 2.. coroutines */
} pm_Sample;

typedef struct pm_Records {
  pm_Engine *E; /* whose memory they are */
  pm_Func *funcs;
  int nfuncs, capfuncs;
  pm_Index fidx;
  pm_Node *nodes;
  int nnodes, capnodes;
  pm_Index nidx;
  pm_Sample *ring;
  int cap, limit; /* limit: the most samples kept, 0 for all */
  int first, count;
  uint64_t dropped; /* samples pushed out of the ring, or lost */
} pm_Records;

/* The number of the function defined at line `defined` (-1: a C function)
** of source src (cut to PM_PROF_SRC - 1 bytes), called as name (NULL:
** unknown; cut to PM_PROF_NAME - 1 bytes at a character boundary), of kind
** what ('L', 'C' or 'm') and group g (or NULL); made on first sight.  -1
** when memory ran out. */
int64_t pm_records_func (pm_Records *R, const char *src, const char *name,
                         int defined, char what, const pm_Group *g);
/* The number of the node (parent: a node's number + 1, or 0 for a root;
** func; line), made on first sight; -1 when memory ran out. */
int64_t pm_records_node (pm_Records *R, uint32_t parent, uint32_t func,
                         int line);
/* Counts weight periods for the stack whose top is node top - 1: self on
** it, total on it and each of its callers, and keeps the sample in the
** ring (the oldest goes when it is full).  Returns 0 when the sample could
** not be kept (it is counted as dropped). */
int pm_records_sample (pm_Records *R, uint32_t top, const pm_Sample *s);
/* The k-th sample kept, the oldest first (k < R->count). */
const pm_Sample *pm_records_at (const pm_Records *R, int k);
/* Sets the most samples kept (0: all); a new limit empties the ring. */
void pm_records_limit (pm_Records *R, int limit);
/* Frees every record; the limit stays. */
void pm_records_free (pm_Records *R);

/* Copies name into a PM_PROF_NAME buffer, cut at a character boundary. */
void pm_records_copy_name (char *to, const char *name);

#endif
