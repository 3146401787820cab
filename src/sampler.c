/*
** sampler.c -- the profiler's timer and signal handler, and the count
** requests they make, answered in the one hook (see sampler.h).
*/
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* SIGEV_THREAD_ID, syscall(SYS_gettid) */
#endif

#include "sampler.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "hook.h"
#include "profiler.h"

#if defined(__linux__) && defined(SIGEV_THREAD_ID)
#define PROF_TIMERS 1
#else
#define PROF_TIMERS 0
#endif

#define PROF_SIGNAL SIGPROF
#define PROF_SLOTS 64 /* profilers running at once, in the process */

/*
** {======================================================
** Count requests: the one hook
** =======================================================
*/

static void request (pm_State *S, lua_State *L) {
  lua_Hook h = lua_gethook(L);
  if (h == NULL)
    lua_sethook(L, pm_sampler_hook, LUA_MASKCOUNT, 1);
  else if (h == pm_sampler_hook || h == S->hook)
    lua_sethook(L, h, lua_gethookmask(L) | LUA_MASKCOUNT, 1);
  /* a foreign hook (debug.sethook) is left alone: no sample */
}

void pm_sampler_unrequest (lua_State *L) {
  int mask = lua_gethookmask(L);
  if (mask & LUA_MASKCOUNT) {
    mask &= ~LUA_MASKCOUNT;
    lua_sethook(L, mask ? lua_gethook(L) : NULL, mask, 0);
  }
}

/* The coroutine running: the monitor's hook knows it exactly; without a
** monitor, the profiler's own tracking of resume and wrap. */
static lua_State *target (pm_Profiler *P) {
  pm_State *S = P->S;
  pm_Thread *t = S->monitors > 0 ? S->current : NULL;
  return t != NULL ? t->L : P->running;
}

static void unrequest_all (pm_Profiler *P, lua_State *L) {
  lua_State *t = target(P);
  pm_sampler_unrequest(L);
  if (t != L)
    pm_sampler_unrequest(t);
  if (P->running != L && P->running != t)
    pm_sampler_unrequest(P->running);
  if (P->S->main != L && P->S->main != t)
    pm_sampler_unrequest(P->S->main);
}

void pm_sampler_hook (lua_State *L, lua_Debug *ar) {
  pm_State *S = pm_state_get(L);
  pm_Profiler *P;
  unsigned w;
  if (S == NULL) {
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  if (ar->event != LUA_HOOKCOUNT) { /* a monitor installed meanwhile */
    if (S->monitors > 0 && S->hook != NULL)
      S->hook(L, ar);
    return;
  }
  P = S->profiler;
  if (P == NULL) {
    pm_sampler_unrequest(L);
    return;
  }
  unrequest_all(P, L);
  if (P->busy || (w = atomic_exchange(&P->pending, 0)) == 0)
    return; /* a request another thread answered, or records being read */
  pm_profiler_sample(P, L, w);
}

void pm_sampler_sethook (pm_State *S, lua_State *L, lua_Hook h, int mask) {
  if (S->profiler != NULL && (lua_gethookmask(L) & LUA_MASKCOUNT)) {
    lua_sethook(L, h != NULL ? h : pm_sampler_hook, mask | LUA_MASKCOUNT, 1);
  } else {
    lua_sethook(L, h, mask, 0);
  }
}

/* }====================================================== */

/*
** {======================================================
** The timer and its signal
** =======================================================
*/

/* The running profilers of the process; a slot is claimed by a compare
** and swap, and its timer then belongs to the profiler that claimed it. */
static _Atomic(pm_Profiler *) slots[PROF_SLOTS];
#if PROF_TIMERS
static timer_t timers[PROF_SLOTS];
#endif
static atomic_uint generation;
static atomic_flag handler_lock = ATOMIC_FLAG_INIT;
static int handler_users; /* running profilers; under handler_lock */
static struct sigaction old_action; /* what the first start replaced */

static uint64_t thread_cpu_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A signal that is not one of ours goes where it went before. */
static void chain (int sig, siginfo_t *si, void *uc) {
  if (old_action.sa_flags & SA_SIGINFO) {
    if (old_action.sa_sigaction != NULL)
      old_action.sa_sigaction(sig, si, uc);
  } else if (old_action.sa_handler != SIG_DFL &&
             old_action.sa_handler != SIG_IGN) {
    old_action.sa_handler(sig);
  }
}

/* Async-signal-safe: atomics, clock_gettime, lua_sethook.  The periods
** counted are the thread's CPU time: a thread blocked or idle asks for no
** sample, and one held up in C code gets a heavier sample later. */
static void on_signal (int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  int tag = si->si_value.sival_int;
  pm_Profiler *P = NULL;
  if (si->si_code == SI_TIMER && tag >= 0)
    P = atomic_load(&slots[tag % PROF_SLOTS]);
  if (P != NULL && P->tag == tag) {
    uint64_t now = thread_cpu_ns();
    uint64_t k = now > P->cpu_mark ? (now - P->cpu_mark) / P->period_ns : 0;
    if (k > 0) {
      lua_State *t = target(P);
      P->cpu_mark += k * P->period_ns;
      atomic_fetch_add(&P->pending, (unsigned)k);
      request(P->S, t);
      if (t != P->S->main)
        request(P->S, P->S->main);
    }
  } else {
    chain(sig, si, uc);
  }
  errno = saved;
}

static void handler_acquire (void) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  if (handler_users++ == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(PROF_SIGNAL, &sa, &old_action);
  }
  atomic_flag_clear(&handler_lock);
}

static void handler_release (void) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  if (--handler_users == 0)
    sigaction(PROF_SIGNAL, &old_action, NULL);
  atomic_flag_clear(&handler_lock);
}

const char *pm_sampler_start (pm_Profiler *P) {
#if PROF_TIMERS
  struct sigevent ev;
  struct itimerspec it;
  int i;
  for (i = 0; i < PROF_SLOTS; i++) {
    pm_Profiler *none = NULL;
    if (atomic_compare_exchange_strong(&slots[i], &none, P))
      break;
  }
  if (i == PROF_SLOTS)
    return "too many profilers running in this process";
  P->slot = i;
  P->tag =
      (int)(((atomic_fetch_add(&generation, 1) + 1) % 1000000u) * PROF_SLOTS +
            (unsigned)i);
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = PROF_SIGNAL;
  ev.sigev_value.sival_int = P->tag;
#ifdef sigev_notify_thread_id
  ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#endif
  handler_acquire();
  if (timer_create(CLOCK_MONOTONIC, &ev, &timers[i]) != 0) {
    handler_release();
    atomic_store(&slots[i], NULL);
    return "timer_create failed";
  }
  P->has_timer = 1;
  P->cpu_mark = thread_cpu_ns();
  it.it_interval.tv_sec = (time_t)(P->period_ns / 1000000000u);
  it.it_interval.tv_nsec = (long)(P->period_ns % 1000000000u);
  it.it_value = it.it_interval;
  timer_settime(timers[i], 0, &it, NULL);
  return NULL;
#else
  (void)P;
  return "the profiler needs POSIX timers with SIGEV_THREAD_ID (Linux)";
#endif
}

/* With the signal blocked, the timer goes and a tick still pending is
** taken, so that the handler can be restored with none in flight. */
void pm_sampler_stop (pm_Profiler *P) {
#if PROF_TIMERS
  sigset_t set, old;
  siginfo_t si;
  struct timespec zero = {0, 0};
  if (!P->has_timer)
    return;
  sigemptyset(&set);
  sigaddset(&set, PROF_SIGNAL);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  timer_delete(timers[P->slot]);
  atomic_store(&slots[P->slot], NULL); /* its timer is free to reuse */
  P->has_timer = 0;
  while (sigtimedwait(&set, &si, &zero) == PROF_SIGNAL)
    if (si.si_code != SI_TIMER)
      chain(PROF_SIGNAL, &si, NULL); /* not ours: hand it on */
  handler_release();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
#else
  (void)P;
#endif
}

/* }====================================================== */
