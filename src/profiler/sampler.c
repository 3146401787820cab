/*
** sampler.c -- the profiler's timer and signal handler, which ask the hook
** for samples, and the answer the hook brings back (see sampler.h).
*/
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* SIGEV_THREAD_ID, syscall(SYS_gettid), dladdr */
#endif

#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <dlfcn.h>
#include <sys/syscall.h>
#endif

#include "hook.h"
#include "profiler.h"
#include "sample.h"

#if defined(__linux__) && defined(SIGEV_THREAD_ID)
#define PROF_TIMERS 1
#else
#define PROF_TIMERS 0
#endif

#define PROF_SIGNAL SIGPROF
#define PROF_SLOTS 64 /* profilers running at once, in the process */
#define PROF_LONG_NS 5000 /* the profiler's own work kept out of the count */

/* A system call, of a µs or more in some virtual machines. */
static uint64_t thread_cpu_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* In the vDSO: tens of ns.  Times the profiler's own work, which is kept
** out of the periods counted when it is long: at least PROF_LONG_NS, or a
** quarter of a period (shorter work counts as the program's, a few µs per
** sample, as a signal's own cost does). */
static uint64_t mono_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t long_ns (const pm_Profiler *P) {
  return P->period_ns / 4 < PROF_LONG_NS ? P->period_ns / 4 : PROF_LONG_NS;
}

/*
** {======================================================
** Answering a request: the sample
** =======================================================
*/

/* The coroutine running: the monitor's hook knows it exactly; without a
** monitor, the profiler's own tracking of resume and wrap. */
static lua_State *target (pm_Profiler *P) {
  pm_State *S = P->S;
  pm_Thread *t = S->e.monitors > 0 ? S->current : NULL;
  return t != NULL ? t->L : P->running;
}

static void unrequest_all (pm_Profiler *P, lua_State *L) {
  lua_State *t = target(P);
  pm_hook_unrequest(P->S, L);
  if (t != L)
    pm_hook_unrequest(P->S, t);
  if (P->running != L && P->running != t)
    pm_hook_unrequest(P->S, P->running);
  if (P->S->main != L && P->S->main != t)
    pm_hook_unrequest(P->S, P->S->main);
}

/* The time the hook spends is the profiler's, not the program's: on the
** thread whose CPU time the timer counts, a long one is kept out of the
** count (P->sampling holds the handler off meanwhile), so that however
** long a sample takes, the program runs a whole period before the next
** one.  Its wall time stands for its CPU time, which it is unless the
** thread was preempted meanwhile: the mark never passes the CPU clock. */
void pm_sampler_answer (pm_Profiler *P, lua_State *L) {
  uint64_t w0 = 0;
  unsigned w;
  int own = P->has_timer && pthread_equal(pthread_self(), P->owner);
  if (own) {
    atomic_store(&P->sampling, 1);
    w0 = mono_ns();
  }
  unrequest_all(P, L);
  /* none pending: a request another coroutine answered; records being
     read: the periods wait for the next sample */
  if (P->reading == 0 && (w = atomic_exchange(&P->pending, 0)) != 0)
    pm_sample_take(P, L, w);
  if (own) {
    uint64_t d = mono_ns() - w0;
    if (d >= long_ns(P)) {
      uint64_t end = thread_cpu_ns();
      P->cpu_mark = P->cpu_mark + d < end ? P->cpu_mark + d : end;
    }
    atomic_store(&P->work_ns, d); /* the timer's pacing (rearm) */
    atomic_store(&P->sampling, 0);
  }
}

/* }====================================================== */

/*
** {======================================================
** The timer and its signal
** =======================================================
*/

/* The running profilers of the process; a slot is claimed by a compare
** and swap, and its timer then belongs to the profiler that claimed it.
** A handler counts itself in inflight[slot] before it loads the slot, so
** that once the slot is emptied and its count is back to 0 no handler can
** still hold the profiler (release_slot), whichever thread it runs on. */
static _Atomic(pm_Profiler *) slots[PROF_SLOTS];
static atomic_int inflight[PROF_SLOTS];
#if PROF_TIMERS
static timer_t timers[PROF_SLOTS];
#endif
static atomic_uint generation;
static atomic_flag handler_lock = ATOMIC_FLAG_INIT;
/* under handler_lock: */
static int handler_users; /* running profilers */
static int handler_set; /* on_signal is installed */
static int handler_kept; /* for good: a tick may still be pending */
static struct sigaction old_action; /* what the first start replaced */

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

/* Counts the whole periods of the thread's CPU time since the last count
** and asks for a sample.  A long request (one through lua_sethook walks
** the stack: a deep one) is kept out of the count, as a long sample is: the periods
** are the program's CPU time, and the profiler cannot starve it. */
static void count_periods (pm_Profiler *P) {
  uint64_t now, k, w0;
  lua_State *t;
  int asked;
  if (atomic_load(&P->sampling))
    return; /* the hook is at work: its time is not counted */
  now = thread_cpu_ns();
  k = now > P->cpu_mark ? (now - P->cpu_mark) / P->period_ns : 0;
  if (k == 0)
    return;
  P->cpu_mark += k * P->period_ns;
  atomic_fetch_add(&P->pending, (unsigned)k);
  t = target(P);
  w0 = mono_ns();
  asked = pm_hook_request(P->S, t);
  if (t != P->S->main)
    asked |= pm_hook_request(P->S, P->S->main);
  if (asked && mono_ns() - w0 >= long_ns(P))
    P->cpu_mark += thread_cpu_ns() - now;
}

#if PROF_TIMERS

/* The smallest latency of the last PROF_LATENCY_RUN signals, from the
** moment the timer was due to the handler: what a signal costs the thread
** on its way in (tens of µs where a timer interrupt exits a virtual
** machine).  The smallest, since a thread preempted meanwhile is late for
** reasons that cost it nothing. */
#define PROF_LATENCY_RUN 8

static void note_latency (pm_Profiler *P, uint64_t entry) {
  uint64_t due = P->armed_at + P->armed_ns;
  uint64_t late = entry > due ? entry - due : 0;
  if (P->latency_n == 0 || late < P->latency_min)
    P->latency_min = late;
  if (++P->latency_n == PROF_LATENCY_RUN) {
    P->latency_ns = P->latency_min;
    P->latency_n = 0;
  }
}

static void arm (pm_Profiler *P, uint64_t delay_ns) {
  struct itimerspec it;
  memset(&it, 0, sizeof(it)); /* one shot: the handler arms the next */
  it.it_value.tv_sec = (time_t)(delay_ns / 1000000000u);
  it.it_value.tv_nsec = (long)(delay_ns % 1000000000u);
  P->armed_at = mono_ns();
  P->armed_ns = delay_ns;
  timer_settime(timers[P->slot], 0, &it, NULL);
}

/* The next signal comes a period away, or later when the profiler's own
** cost of this one was high: twice the signal's latency (its way out of
** the handler takes about as long as its way in), the handler (a request
** walks the stack where it goes through lua_sethook: trap.h) and the
** hook's last sample, PROF_PACE times over.  A walk also costs the program
** afterwards (it leaves the caches cold), hence 3, not 2: the program
** keeps at least half of its thread's time whatever the rate and however
** deep its stack, and a put-off sample only weighs more.  The tick timer's lateness is the
** scheduler tick's, no cost: it counts only the handler and the sample. */
#define PROF_PACE 3
static void rearm (pm_Profiler *P, uint64_t entry) {
  uint64_t cost, delay;
  if (P->timer == PM_TIMER_PRECISE)
    note_latency(P, entry);
  cost =
      2 * P->latency_ns + (mono_ns() - entry) + atomic_exchange(&P->work_ns, 0);
  delay = P->period_ns;
  if (PROF_PACE * cost > delay) {
    delay = PROF_PACE * cost;
    P->throttled++;
  }
  arm(P, delay);
}

#endif

/* Async-signal-safe: atomics, clock_gettime, pm_hook_request (as
** lua_sethook is), timer_settime.  The periods counted are the thread's
** CPU time, whichever clock the timer runs on (timer_clock): a thread
** blocked or idle asks for no sample, and one held up in C code, or
** signalled only at a scheduler tick, gets a heavier sample later. */
static void on_signal (int sig, siginfo_t *si, void *uc) {
  int saved = errno, ours = 0;
  if (si->si_code == SI_TIMER && si->si_value.sival_int >= 0) {
    int tag = si->si_value.sival_int, i = tag % PROF_SLOTS;
    pm_Profiler *P;
    atomic_fetch_add(&inflight[i], 1);
    P = atomic_load(&slots[i]);
    if (P != NULL && atomic_load(&P->tag) == tag) {
      uint64_t entry = mono_ns();
      ours = 1;
      count_periods(P);
#if PROF_TIMERS
      rearm(P, entry);
#endif
    }
    atomic_fetch_sub(&inflight[i], 1);
  }
  if (!ours)
    chain(sig, si, uc);
  errno = saved;
}

#if PROF_TIMERS

/* Keeps this library loaded for good: lua_close unloads C modules, and a
** handler left installed must not point into unmapped code. */
static void pin_library (void) {
  Dl_info info;
  if (dladdr((void *)on_signal, &info) != 0 && info.dli_fname != NULL)
    dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

static void handler_acquire (void) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  handler_users++;
  if (!handler_set) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(PROF_SIGNAL, &sa, &old_action);
    handler_set = 1;
  }
  atomic_flag_clear(&handler_lock);
}

/* keep: a tick may still be pending on some thread, and find the default
** action (the end of the process) if the handler went: it stays. */
static void handler_release (int keep) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  if (keep && !handler_kept) {
    handler_kept = 1;
    pin_library();
  }
  if (--handler_users == 0 && !handler_kept) {
    sigaction(PROF_SIGNAL, &old_action, NULL);
    handler_set = 0;
  }
  atomic_flag_clear(&handler_lock);
}

/* Empties P's slot and waits for the handlers that may have found P there
** (they run for microseconds): no handler touches P afterwards. */
static void release_slot (pm_Profiler *P) {
  atomic_store(&slots[P->slot], NULL);
  while (atomic_load(&inflight[P->slot]) != 0)
    sched_yield();
}

static long this_thread (void) {
  return (long)syscall(SYS_gettid);
}

/* Whether thread tid of this process has the signal pending, as Linux
** shows it (SigPnd, the signals sent to that thread); 1 when it cannot
** tell, 0 when the thread is gone (its signals went with it). */
static int pending_on (long tid) {
  char path[64], buf[2048], *p;
  ssize_t n;
  int fd;
  snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return errno != ENOENT && errno != ESRCH;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 1;
  buf[n] = '\0';
  if ((p = strstr(buf, "\nSigPnd:")) == NULL)
    return 1;
  return (strtoull(p + 8, NULL, 16) >> (PROF_SIGNAL - 1)) & 1;
}

/* The one difference between the timers.  CLOCK_MONOTONIC: a signal every
** period, each a timer interrupt of its own (tens of µs in some virtual
** machines).  The thread's CPU clock (that of the calling thread, for
** timer_create): the kernel checks it at its scheduler tick, so a signal
** comes at the first tick after a period of the thread's CPU time, at
** most HZ a second, and costs no interrupt of its own (the tick comes
** anyway).  A thread that uses no CPU gets no signal at all.  The handler
** counts the periods on the CPU clock either way: a late signal only
** makes a heavier sample. */
static clockid_t timer_clock (const pm_Profiler *P) {
  return P->timer == PM_TIMER_TICK ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

#endif

const char *pm_sampler_start (pm_Profiler *P) {
#if PROF_TIMERS
  struct sigevent ev;
  int i;
  P->tid = this_thread();
  P->owner = pthread_self();
  atomic_store(&P->tag, -1); /* a stale tick of the slot is not P's */
  atomic_store(&P->sampling, 0);
  for (i = 0; i < PROF_SLOTS; i++) {
    pm_Profiler *none = NULL;
    if (atomic_compare_exchange_strong(&slots[i], &none, P))
      break;
  }
  if (i == PROF_SLOTS)
    return "too many profilers running in this process";
  P->slot = i;
  atomic_store(
      &P->tag,
      (int)(((atomic_fetch_add(&generation, 1) + 1) % 1000000u) * PROF_SLOTS +
            (unsigned)i));
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = PROF_SIGNAL;
  ev.sigev_value.sival_int = atomic_load(&P->tag);
#ifdef sigev_notify_thread_id
  ev.sigev_notify_thread_id = (pid_t)P->tid;
#else
  ev._sigev_un._tid = (pid_t)P->tid;
#endif
  handler_acquire();
  if (timer_create(timer_clock(P), &ev, &timers[i]) != 0) {
    handler_release(0); /* no tick was ever sent */
    atomic_store(&slots[i], NULL);
    return "timer_create failed";
  }
  P->has_timer = 1;
  P->cpu_mark = thread_cpu_ns();
  P->latency_ns = P->latency_min = 0;
  P->latency_n = 0;
  atomic_store(&P->work_ns, 0);
  arm(P, P->period_ns);
  return NULL;
#else
  (void)P;
  return "the profiler needs POSIX timers with SIGEV_THREAD_ID (Linux)";
#endif
}

/* A tick the timer sent just before it went may still be pending on the
** thread it signals, and be delivered there later (kernels before 6.13
** deliver it; later ones drop it): the handler must outlive it, or the
** default action of SIGPROF ends the process.  On that thread, with the
** signal blocked, the tick is taken here.  From another thread (a state
** handed to it), the handler stays until that thread has none pending: it
** takes it as soon as it runs with the signal unblocked.  If it keeps one
** (it blocks the signal, or never runs), the handler stays for good, and
** hands every signal on to the previous one. */
void pm_sampler_stop (pm_Profiler *P) {
#if PROF_TIMERS
  int i;
  if (!P->has_timer)
    return;
  P->has_timer = 0;
  if (this_thread() == P->tid) {
    sigset_t set, old;
    siginfo_t si;
    struct timespec zero = {0, 0};
    sigemptyset(&set);
    sigaddset(&set, PROF_SIGNAL);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    timer_delete(timers[P->slot]);
    release_slot(P); /* its timer is free to reuse */
    while (sigtimedwait(&set, &si, &zero) == PROF_SIGNAL)
      if (si.si_code != SI_TIMER)
        chain(PROF_SIGNAL, &si, NULL); /* not ours: hand it on */
    handler_release(0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  } else {
    struct timespec pause = {0, 500000};
    release_slot(P); /* no handler re-arms the timer after this */
    timer_delete(timers[P->slot]);
    for (i = 0; i < 100 && pending_on(P->tid); i++)
      nanosleep(&pause, NULL); /* up to 50 ms for it to run */
    handler_release(pending_on(P->tid));
  }
#else
  (void)P;
#endif
}

/* }====================================================== */
