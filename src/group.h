/*
** group.h -- performance groups, the sets of groups code belongs to, and
** the environments that map code to groups.
**
** A group is what perfmon reports on: a plugin, a page, a sandbox, a chunk.
** Groups die as Firefox's do: a group is counted (refs) by its Lua handle,
** each environment and source prefix it is attached to, and its chunk (a
** chunk group); at zero it is dead, left out of snapshots, and freed by
** the next sweep (pm_groups_sweep) once no frame or stopwatch list holds
** it.  Ids are never reused.
**
** A set is the interned, sorted list of the active groups a function
** belongs to.  Sets are compared by address, so "does this call change the
** running groups?" is one compare on the hot path.
**
** An environment record (pm_Env) holds the groups attached to one _ENV
** table.  Chunk records, and the set a function's environment, chunk and
** source prefixes give, are chunk.h's.
*/
#ifndef PM_GROUP_H
#define PM_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"

#define PM_DURATIONS 10 /* durations[k] counts runs >= 2^(k-1) ms */
#define PM_SET_MAX 32 /* groups in one set */
#define PM_ENV_GROUPS 31 /* groups on one environment (+ its chunk group) */
/* a chunk's keys for source prefixes: its path, and its path with its
** last component as named where that is a symlink */
#define PM_CHUNK_KEYS 2

typedef struct pm_Engine pm_Engine;

/* Memory allocated (the memory probe): bytes, and blocks newly made. */
typedef struct pm_Allocs {
  uint64_t bytes, count;
} pm_Allocs;

/* A group's totals.  cpu: CPU time while the group was on the stack
** (inclusive); self: while it was in the innermost frame's set; alloc and
** self_alloc: the memory allocated meanwhile; samples and self_samples:
** in sampled mode, the samples its cpu and self are made of. */
typedef struct pm_Stats {
  /* what every event a group runs in adds to, first and together */
  uint64_t ticks;
  uint64_t events; /* events it ran in: what durations counts from */
  double event_us, self_event_us; /* the sums over those events */
  pm_CpuTime cpu, self;
  double blocking_us;
  pm_Allocs alloc, self_alloc;
  uint64_t durations[PM_DURATIONS]; /* of its CPU time per event */
  uint64_t self_durations[PM_DURATIONS]; /* of its self time per event */
  uint64_t samples, self_samples;
} pm_Stats;

/* What a group's samples gave it in the sample window (engine.h's
** pm_SampleWindow) that `id` names: an older window's figures read as
** none, so that opening one resets no group. */
typedef struct pm_WindowStats {
  uint64_t id;
  double cpu_us, self_us;
  uint64_t samples, self_samples;
} pm_WindowStats;

/* Cycles charged to a group and the CPU time windows made of them
** (stopwatch.c): one meter for its inclusive time, one for its self time. */
typedef struct pm_Meter {
  uint64_t window_cycles; /* charged in the open window */
  uint64_t open_cycles; /* the part of those charged in this period */
  pm_CpuTime period_time; /* of this period, from windows closed in it */
} pm_Meter;

typedef struct pm_Env pm_Env;

typedef struct pm_Group pm_Group;

typedef struct pm_Ctx pm_Ctx;

typedef struct pm_Set {
  uint32_t hash;
  int n;
  /* no group of it is a plugin's (every one is a library, or it has none):
  ** a call into it from another group's code charges that code's self
  ** time (pm_ctx_self) */
  int lib;
  /* the context last entered into this set from base ctx_from (context.h):
  ** a cache, the only part of an interned set that changes */
  pm_Ctx *ctx_from, *ctx;
  pm_Group *g[1]; /* n of them, sorted by id */
} pm_Set;

struct pm_Group {
  /* Its own set ({it}), which most of its functions run in: a call into
  ** it reads the set and its context (context.h) from the group's first
  ** line. */
  pm_Set solo;
  /* what a flush of the contexts writes (stopwatch.c) */
  uint64_t touched_period;
  pm_Group *next_touched;
  uint64_t recent_cycles; /* since the period began */
  uint64_t recent_ticks;
  double recent_blocking;
  /* sampled mode (pm_sw_sample): how many samples charged it in this
  ** period, and its time in the period's event, inclusive and self */
  uint64_t recent_samples, recent_self_samples;
  double sample_event_us, sample_self_us;
  uint64_t in_window; /* the window it is listed in */
  pm_Group *next_windowed;
  pm_Meter all, self; /* inclusive and self */
  /* the memory probe's, only while it is held */
  pm_Allocs recent_alloc, recent_self_alloc; /* since the period began */
  int id; /* 1.., never reused; 0 is the process */
  char *name, *kind;
  int refs; /* its handle, environments, source prefixes, its chunk */
  /* a library (a host's core API, its util modules): fixed before any set
  ** names it, as sets read it when interned */
  int library;
  int dead; /* refs reached 0: no longer reported, freed by a sweep */
  int dying; /* a sweep frees it: nothing running holds it */
  pm_Env **envs; /* the environments it is attached to, for memberships */
  int nenv, envcap;
  pm_Env *chunk_env; /* chunk groups: the chunk's environment */
  pm_Stats total;
  /* sampled mode: the last sample that charged it, and the last that
  ** found it innermost */
  uint64_t sample_stamp, sample_self;
  pm_WindowStats sample_window; /* its figures in the sample window */
  uint64_t alloc_stamp, alloc_self; /* the same for sampled allocations */
  /* alerts (alert.c): the highest times since its last alert */
  double alert_jank, alert_self, alert_blocking; /* µs in one event */
  int alert_reason; /* PM_ALERT_*: an alert waits to be taken */
  int alert_visible;
  int alert_count; /* events over a threshold since its last alert */
  int alert_self_count; /* those of them that janked on self time */
  double alert_time; /* realtime µs of the event that raised it */
};

struct pm_Env {
  const void *table; /* NULL once the table is collected */
  int refs; /* chunk records and chunk groups naming it */
  int used; /* a cached set was made of its groups: attaching forgets them */
  int n;
  pm_Group *g[PM_ENV_GROUPS];
  pm_Env *next, *prev; /* all records, for memberships */
};

/* A new group with one reference (its handle, or its chunk); a library
** when library is not 0. */
pm_Group *pm_group_new (pm_Engine *E, const char *name, const char *kind,
                        int library);
/* The group with that id, NULL when it never was or was freed; a dead
** group not yet swept is returned, marked. */
pm_Group *pm_group_get (pm_Engine *E, int id);
/* Drops a reference.  Never frees: safe inside the allocator wrapper. */
void pm_group_release (pm_Engine *E, pm_Group *g);
/* Frees the dead groups nothing running holds, with the sets that name
** them: spare(ud) clears `dying` on the groups of every frame alive (the
** adapter's shadow stacks: pm_hook_spare).
** Forgets every cached function -> set when a set goes.  Not from the hook
** nor the allocator.  Returns how many were freed. */
int pm_groups_sweep (pm_Engine *E, void (*spare)(void *ud), void *ud);
/* During a sweep: whether s (or NULL) names a group it frees, and keeping
** every group s names. */
int pm_set_dying (const pm_Set *s);
void pm_set_spare (const pm_Set *s);

pm_Env *pm_env_get (pm_Engine *E, const void *table, int create);
enum { PM_ATTACH_OK, PM_ATTACH_FULL, PM_ATTACH_NOMEM };
int pm_env_attach (pm_Engine *E, pm_Env *e, pm_Group *g); /* PM_ATTACH_* */
int pm_env_detach (pm_Engine *E, pm_Env *e, pm_Group *g);
void pm_env_unref (pm_Engine *E, pm_Env *e);
void pm_env_forget (pm_Engine *E, pm_Env *e); /* its table was collected */

/* A load's functions share upvalues (the locals of its main chunk), and
** those that touch a global share its _ENV.  pm_env_link says that the
** upvalue whose identity is uv (lua_upvalueid) belongs to a function of
** environment e; an upvalue seen under two environments belongs to none
** (`local _ENV = M` beside the load's own).  Returns 0 when memory ran
** out.  pm_env_of_upvalue: the environment of uv, or NULL.
** pm_upvalue_forget: uv was freed (its entry v, from the map). */
int pm_env_link (pm_Engine *E, const void *uv, pm_Env *e);
pm_Env *pm_env_of_upvalue (pm_Engine *E, const void *uv);
void pm_upvalue_forget (pm_Engine *E, uintptr_t v);

/* The interned set of the n groups g (sorted here), made if new; NULL
** when memory ran out. */
pm_Set *pm_set_intern (pm_Engine *E, pm_Group **g, int n);
void pm_sets_free (pm_Engine *E);

/* Groups that contain g: attached to every environment g is attached to
** (for a chunk group, its environment's groups), read from g's own list of
** environments.  Writes up to max ids. */
int pm_memberships (const pm_Group *g, int *ids, int max);

/* Forgets every cached function -> set resolution: called whenever what a
** function resolves to may have changed (attach, detach, probes). */
void pm_functions_forget (pm_Engine *E);

/* Frees every group, set and environment record, and the address maps:
** the adapter's records in them are gone (pm_chunks_free, which calls
** this, frees the chunk records first). */
void pm_groups_free (pm_Engine *E);

#endif
