/*
** sample.h -- taking a sample, in the hook, at a safe point.
**
** The stack is walked with lua_getstack/lua_getinfo (or through CallInfo,
** frame.h, where it passed its check) into preallocated buffers, and
** interned into the records (records.h): each function, then the path of
** nodes from the bottom up.  Each thread gets a number in the running
** profiler's weak table of threads.  Lua 5.4 runs finalizers with hooks
** off and the collector in C: no sample is ever taken inside either; a
** sentinel, garbage from birth, says when a collection finished, and the
** periods the next sample was held off for count as the collector's.
*/
#ifndef PM_SAMPLE_H
#define PM_SAMPLE_H

#include "profiler.h"

/* Pushes what the registry holds for the running profiler (its userdata,
** false, or nil before the first start); returns it, or NULL. */
pm_Profiler *pm_sample_running (lua_State *L);
/* Makes the value at idx (a profiler's userdata, or false) what it holds. */
void pm_sample_set_running (lua_State *L, int idx);

/* Makes the walk's buffers; returns 0 when memory ran out. */
int pm_sample_open (pm_Profiler *P);
/* Forgets the cached names of calls: functions may be gone. */
void pm_sample_forget_names (pm_Profiler *P);
void pm_sample_close (pm_Profiler *P);

/* A sample of L standing for weight periods. */
void pm_sample_take (pm_Profiler *P, lua_State *L, unsigned weight);
/* The node (number + 1) of L's stack from level skip up, made as a sample
** would make it, without counting a sample: 0 for an empty stack, -1 when
** memory ran out. */
int64_t pm_sample_frame (lua_State *L, pm_Profiler *P, int skip);
/* Pushes a new sentinel: garbage once it is popped. */
void pm_sample_sentinel (lua_State *L);

#endif
