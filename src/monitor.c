/*
** monitor.c -- monitors: opening and closing them, and what their counts
** decide (monitor.h).
*/
#include "monitor.h"

#include "hook.h"
#include "resolve.h"
#include "sampled.h"
#include "stopwatch.h"

/* debug.sethook is shared while exact monitors are open or a sampler runs
** (monitor.h). */
void pm_monitor_share (lua_State *L, pm_State *S) {
  int sampling = S->samplers[PM_SAMPLER_MONITOR] != NULL ||
                 S->samplers[PM_SAMPLER_PROFILER] != NULL;
  if (S->hooks_shared != NULL)
    S->hooks_shared(L, S->exact > 0 || sampling);
}

/* The first monitor of either mode finds the chunks and environments of
** the functions that ran before (resolve.c); the first exact one gives
** every coroutine the hook.  Both change what functions resolve to: what
** was resolved before (by a profiler, or without the hook) goes, once. */
const char *pm_monitor_open (lua_State *L, pm_State *S, unsigned probes,
                             uint32_t rate_us, int timer) {
  const char *err;
  int forget = S->e.monitors == 0, sampled = rate_us != 0;
  /* the sets go with the last exact monitor, and the empty one with them */
  if (S->e.empty == NULL &&
      (S->e.empty = pm_set_for(&S->e, NULL, NULL, NULL, NULL)) == NULL)
    return "not enough memory";
  if (forget) {
    pm_resolve_discover(L, S);
    S->hook_lost = 0; /* monitoring restarts: a loss before it is not its */
  }
  if (sampled && (err = pm_sampled_open(S, rate_us, timer)) != NULL)
    return err;
  if (!sampled && S->exact == 0 && !pm_hook_adopt(L, S))
    return "not enough memory";
  pm_sw_probes(&S->e, probes, 1);
  if (S->e.monitors++ == 0)
    pm_sw_start(&S->e);
  if (!sampled && S->exact++ == 0 && pm_hook_install(L, S))
    forget = 1;
  if (forget)
    pm_functions_forget(&S->e);
  pm_monitor_share(L, S);
  return NULL;
}

/* The last exact monitor takes the hook away, and the last monitor of
** either mode every cached function and set. */
void pm_monitor_close (lua_State *L, pm_State *S, unsigned probes,
                       uint32_t rate_us) {
  int sampled = rate_us != 0, hook_off;
  if ((sampled ? S->nsampled : S->exact) == 0)
    return;
  hook_off = !sampled && --S->exact == 0;
  pm_sw_probes(&S->e, probes, -1);
  if (sampled)
    pm_sampled_close(S, rate_us);
  if (--S->e.monitors == 0 || hook_off) {
    pm_sw_stop(&S->e);
    pm_hook_uninstall(L, S);
  }
  pm_monitor_share(L, S);
}

void pm_monitor_free (lua_State *L, pm_State *S) {
  pm_sampled_free(S);
  if (S->e.monitors > 0)
    pm_hook_uninstall(NULL, S);
  S->e.monitors = 0;
  S->exact = 0;
  pm_monitor_share(L, S);
}
