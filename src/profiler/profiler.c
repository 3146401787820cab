/*
** profiler.c -- starting, stopping and resetting a sampling profiler (see
** profiler.h, docs/profiler.md).
*/
#include "profiler.h"

#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "coroutines.h"
#include "hook.h"
#include "monitor.h"
#include "sample.h"
#include "sampler.h"

/*
** {======================================================
** Start, stop, reset
** =======================================================
*/

/* The sampler's take: s is the first member of its profiler. */
static void take (pm_Sampler *s, lua_State *L, unsigned weight) {
  pm_sample_take((pm_Profiler *)s, L, weight);
}

void pm_profiler_init (pm_Profiler *P, pm_State *S) {
  memset(P, 0, sizeof(*P));
  pm_sampler_init(&P->s, S, take);
  P->S = S;
  P->r.E = &S->e;
  P->state = PM_PROF_NEW;
  P->interval_us = 1000;
}

/* Allocation-free: the registry's key is there (start made it), and the
** anchor has the originals.  The registry's value becomes false, never
** nil, so that the key stays for the next start. */
void pm_profiler_stop (lua_State *L, pm_Profiler *P, int idx, int state) {
  pm_State *S = P->S;
  pm_sampler_stop(&P->s);
  if (!S->closed && idx != 0) {
    if (lua_getiuservalue(L, idx, PM_PROF_ANCHOR) == LUA_TTABLE)
      pm_coroutines_unpatch(L, lua_gettop(L));
    lua_pop(L, 1);
    pm_hook_unrequest(S, S->main);
    if (P->s.running != NULL)
      pm_hook_unrequest(S, P->s.running);
    if (S->exact > 0 && S->current != NULL)
      pm_hook_unrequest(S, S->current->L);
  }
  if (S->profiler == P) {
    S->profiler = NULL;
    S->samplers[PM_SAMPLER_PROFILER] = NULL;
    if (!S->closed)
      pm_monitor_share(L, S);
  }
  if (pm_sample_running(L) == P) {
    lua_pushboolean(L, 0);
    pm_sample_set_running(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  P->micros += pm_wall_us() - P->since_us;
  P->s.running = NULL;
  P->state = state;
}

/* Everything that allocates or can fail comes first, and changes nothing
** anyone else sees (the buffers, the registry's key, the anchor's
** contents, the sentinel, the timer); what follows the timer neither
** allocates nor raises.  A memory error can then only leave P as it was. */
static void start (lua_State *L, pm_Profiler *P, int idx, uint32_t rate_us,
                   int timer, uint32_t max_samples) {
  pm_State *S = P->S;
  pm_Profiler *other;
  const char *err;
  int anchor, top = lua_gettop(L);
  luaL_checkstack(L, 12, NULL);
  if (!pm_sample_open(P))
    luaL_error(L, "not enough memory");
  if (pm_sample_running(L) == NULL) {
    lua_pushboolean(L, 0); /* the key, so that stop and start can set it */
    pm_sample_set_running(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_getiuservalue(L, idx, PM_PROF_ANCHOR); /* ... anchor */
  anchor = lua_gettop(L);
  lua_pushthread(L);
  lua_rawseti(L, anchor, PM_ANCHOR_THREAD); /* P->s.running must stay alive */
  other = pm_sample_running(L); /* ... anchor other */
  pm_coroutines_prepare(L, S, anchor, other != NULL ? lua_gettop(L) : 0);
  pm_sample_sentinel(L); /* ... anchor other sentinel */
  P->s.period_ns = (uint64_t)rate_us * 1000u;
  P->s.timer = timer;
  P->s.running = L;
  atomic_store(&P->s.pending, 0);
  if ((err = pm_sampler_start(&P->s)) != NULL) {
    P->s.running = NULL;
    luaL_error(L, "%s", err);
  }
  /* committed: no allocation, no error from here on */
  pm_sample_forget_names(P);
  if (other != NULL && other != P) /* forcibly stopped */
    pm_profiler_stop(L, other, anchor + 1, PM_PROF_FORCED);
  pm_records_limit(&P->r, (int)max_samples); /* a new one empties the ring */
  pm_sample_set_running(L, idx); /* an existing key */
  if (!S->running_direct) /* else the sampler reads the chain of resumes */
    pm_coroutines_patch(L, anchor);
  P->fast = S->frame_direct;
  P->interval_us = (double)rate_us;
  S->profiler = P;
  S->samplers[PM_SAMPLER_PROFILER] = &P->s;
  pm_monitor_share(L, S); /* neither allocates nor raises */
  P->state = PM_PROF_RUNNING;
  P->cycles_seen = P->cycles;
  P->since_us = pm_wall_us();
  if (P->start_realtime == 0)
    P->start_realtime = pm_realtime_us();
  lua_settop(L, top); /* the sentinel is garbage */
}

void pm_profiler_start (lua_State *L, pm_Profiler *P, int idx, uint32_t rate_us,
                        int timer, uint32_t max_samples, int after) {
  pm_State *S = P->S;
  int state = P->state;
  double micros = P->micros, realtime = P->start_realtime;
  idx = lua_absindex(L, idx);
  if (P->state == PM_PROF_RUNNING)
    luaL_error(L, "the profiler is already running; stop() it first");
  if (P->s.hold > 0)
    luaL_error(L, "its records are being read (a finalizer ran during "
                  "results(), samples() or to_gecko())");
  if (pm_hook_foreign(S, L) || pm_hook_foreign(S, S->main))
    luaL_error(L, "a debug hook is already set (debug.sethook); the "
                  "profiler needs the count hook");
  start(L, P, idx, rate_us, timer, max_samples);
  if (after != 0 && S->e.monitors > 0) {
    after = lua_absindex(L, after);
    lua_pushvalue(L, after);
    lua_pushvalue(L, after + 1);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
      if (P->state == PM_PROF_RUNNING) { /* as if it never started */
        pm_profiler_stop(L, P, idx, state);
        P->micros = micros;
        P->start_realtime = realtime;
      }
      lua_error(L);
    }
  }
}

void pm_profiler_reset (pm_Profiler *P) {
  pm_records_free(&P->r);
  P->r.dropped = 0;
  P->total = P->gc = P->truncated = P->s.throttled = 0;
  P->micros = 0;
  P->since_us = pm_wall_us();
  P->start_realtime = P->state == PM_PROF_RUNNING ? pm_realtime_us() : 0;
}

void pm_profiler_free (pm_Profiler *P) {
  pm_records_free(&P->r);
  pm_sample_close(P);
}

/* }====================================================== */
