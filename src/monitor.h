/*
** monitor.h -- monitors: opening and closing them, and what their counts
** decide.
**
** A monitor is exact (the call/return hook measures every group) or
** sampled every rate_us µs of CPU time (sampled.h).  This room keeps the
** counts (S->e.monitors, S->exact; sampled.c keeps the sampled ones' rates)
** and what changes with them: the first monitor of either mode finds the
** chunks and environments in the heap (resolve.c) and starts the
** stopwatch; the first exact one installs the hook (hook.h), the last takes
** it away; the last of either mode forgets every cached function and set.
** And debug.sethook is shared while exact monitors are open or a sampler
** runs (a sampled monitor's, the profiler's: their sample requests set a
** count hook that debug.gethook must not show): this room tells
** S->hooks_shared (lhooks.c registers it) whenever either may have changed.
*/
#ifndef PM_MONITOR_H
#define PM_MONITOR_H

#include "state.h"

/* A monitor of probes opens or closes: exact (rate_us 0), or sampled every
** rate_us µs of CPU time on the timer it asks for (sampled.h).  Opening
** returns an error message or NULL; closing a monitor of a mode none is
** open of does nothing. */
const char *pm_monitor_open (lua_State *L, pm_State *S, unsigned probes,
                             uint32_t rate_us, int timer);
void pm_monitor_close (lua_State *L, pm_State *S, unsigned probes,
                       uint32_t rate_us);
/* Sets debug.sethook shared or not as the counts and samplers say; the
** profiler calls it when its sampler starts or stops. */
void pm_monitor_share (lua_State *L, pm_State *S);
/* lua_close: every monitor left open goes, the samplers' timer with it. */
void pm_monitor_free (lua_State *L, pm_State *S);

#endif
