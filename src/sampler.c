/*
** sampler.c -- the samplers' timer and signal handler, which ask the hook
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
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#endif

#include "hook.h"
#include "trap.h"

#if defined(__linux__) && defined(SIGEV_THREAD_ID)
#define PROF_TIMERS 1
#else
#define PROF_TIMERS 0
#endif
#if PROF_TIMERS && defined(SYS_perf_event_open) && defined(F_SETSIG)
#define PROF_CPU_TIMER 1
#else
#define PROF_CPU_TIMER 0
#endif

#define PROF_SIGNAL SIGPROF
#define PROF_SLOTS 64 /* samplers running at once, in the process */
#define PROF_LONG_NS 5000 /* the sampler's own work kept out of the count */

/* A system call, of a µs or more in some virtual machines. */
static uint64_t thread_cpu_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* In the vDSO: tens of ns.  Times the sampler's own work, which is kept
** out of the periods counted when it is long: at least PROF_LONG_NS, or a
** quarter of a period (shorter work counts as the program's, a few µs per
** sample, as a signal's own cost does). */
static uint64_t mono_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t long_ns (const pm_Sampler *s) {
  return s->period_ns / 4 < PROF_LONG_NS ? s->period_ns / 4 : PROF_LONG_NS;
}

/*
** {======================================================
** Answering a request: the sample
** =======================================================
*/

void pm_sampler_init (pm_Sampler *s, pm_State *S,
                      void (*take)(pm_Sampler *, lua_State *, unsigned)) {
  memset(s, 0, sizeof(*s));
  s->S = S;
  s->take = take;
  S->answer = pm_sampler_answer; /* the hook's way back to samplers */
  s->slot = -1;
  s->timer = PM_TIMER_PRECISE;
  s->fd = -1;
  atomic_init(&s->pending, 0);
  atomic_init(&s->next_period_ns, 0);
  atomic_init(&s->tag, -1);
  atomic_init(&s->sampling, 0);
}

/* The coroutine running: the exact monitor's hook knows it; without one,
** the chain of resumes from the main thread (trap.h) where its check
** passed, else the sampler's own tracking (the profiler's resume and wrap),
** else the main thread alone. */
static lua_State *target (pm_Sampler *s) {
  pm_State *S = s->S;
  lua_State *L = s->running;
  if (S->exact > 0 && S->current != NULL)
    return S->current->L;
  if (S->running_direct) {
    lua_State *chain[PM_TRAP_CHAIN];
    return chain[pm_trap_chain(S->main, S->co_f, chain) - 1];
  }
  return L != NULL ? L : S->main;
}

lua_State *pm_sampler_target (pm_Sampler *s) {
  return target(s);
}

static void unrequest_all (pm_Sampler *s, lua_State *L) {
  lua_State *t = target(s);
  pm_hook_unrequest(s->S, L);
  if (t != L)
    pm_hook_unrequest(s->S, t);
  if (s->running != NULL && s->running != L && s->running != t)
    pm_hook_unrequest(s->S, s->running);
  if (s->S->main != L && s->S->main != t)
    pm_hook_unrequest(s->S, s->S->main);
}

/* The time the hook spends is the sampler's, not the program's: on the
** thread whose CPU time the timer counts, a long one is kept out of the
** count (s->sampling holds the handler off meanwhile), so that however
** long a sample takes, the program runs a whole period before the next
** one.  Its wall time stands for its CPU time, which it is unless the
** thread was preempted meanwhile: so a long one is bounded by the CPU
** time since the request, and the mark never passes the CPU clock.  A
** preempted sample then neither holds the next one off (rearm) nor
** leaves the periods it waited uncounted. */
void pm_sampler_answer (pm_Sampler *s, lua_State *L) {
  uint64_t w0 = 0;
  unsigned w;
  /* an answer to the allocator alone is short (sampled.c paces it) */
  int own = s->has_timer && atomic_load(&s->pending) != 0 &&
            pthread_equal(pthread_self(), s->owner);
  if (own) {
    atomic_store(&s->sampling, 1);
    w0 = mono_ns();
  }
  unrequest_all(s, L);
  /* none pending: a request another coroutine answered; records being
     read: the periods wait for the next sample */
  if (s->hold == 0 &&
      ((w = atomic_exchange(&s->pending, 0)) != 0 || s->asked)) {
    s->asked = 0;
    s->take(s, L, w);
  }
  if (own) {
    uint64_t d = mono_ns() - w0;
    if (d >= long_ns(s)) {
      uint64_t end = thread_cpu_ns();
      if (end > s->asked_cpu && end - s->asked_cpu < d)
        d = end - s->asked_cpu;
      s->cpu_mark = s->cpu_mark + d < end ? s->cpu_mark + d : end;
    }
    atomic_store(&s->work_ns, d); /* the timer's pacing (rearm) */
    atomic_store(&s->sampling, 0);
  }
}

/* }====================================================== */

/*
** {======================================================
** The timer and its signal
** =======================================================
*/

/* The running samplers of the process; a slot is claimed by a compare
** and swap, and its timer then belongs to the sampler that claimed it.
** A handler counts itself in inflight[slot] before it loads the slot, so
** that once the slot is emptied and its count is back to 0 no handler can
** still hold the sampler (release_slot), whichever thread it runs on. */
static _Atomic(pm_Sampler *) slots[PROF_SLOTS];
static atomic_int inflight[PROF_SLOTS];
#if PROF_TIMERS
static timer_t timers[PROF_SLOTS];
#endif
#if PROF_CPU_TIMER
/* the CPU timer's event of each slot, as its descriptor + 1 (0: none) */
static atomic_int cpu_fds[PROF_SLOTS];
#endif
static atomic_uint generation;
static atomic_flag handler_lock = ATOMIC_FLAG_INIT;
/* under handler_lock: */
static int handler_users; /* running samplers */
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

/* A count event at the next instruction of the coroutine that runs, and
** of the main thread, where it cannot be read or runs no more (a return
** too, with ret): whether one was asked for. */
static int request (pm_Sampler *s, int ret) {
  lua_State *t = target(s);
  int asked = pm_hook_request(s->S, t, ret);
  if (t != s->S->main)
    asked |= pm_hook_request(s->S, s->S->main, ret);
  return asked;
}

void pm_sampler_ask (pm_Sampler *s) {
  s->asked = 1;
  request(s, 1);
}

/* Counts the whole periods of the thread's CPU time since the last count
** and asks for a sample.  A long request (one through lua_sethook walks
** the stack: a deep one) is kept out of the count, as a long sample is: the periods
** are the program's CPU time, and the sampler cannot starve it. */
static void count_periods (pm_Sampler *s, uint64_t now) {
  uint64_t k, w0, period = atomic_load(&s->next_period_ns);
  int asked;
  if (atomic_load(&s->sampling))
    return; /* the hook is at work: its time is not counted */
  if (period != 0)
    s->period_ns = period; /* pm_sampler_retime's, while no hook reads it */
  k = now > s->cpu_mark ? (now - s->cpu_mark) / s->period_ns : 0;
  if (k == 0)
    return;
  s->cpu_mark += k * s->period_ns;
  s->asked_cpu = now;
  atomic_fetch_add(&s->pending, (unsigned)k);
  w0 = mono_ns();
  asked = request(s, 0);
  if (asked && mono_ns() - w0 >= long_ns(s))
    s->cpu_mark += thread_cpu_ns() - now;
}

#if PROF_TIMERS

/* The smallest latency of the last PROF_LATENCY_RUN signals, from the
** moment the timer was due to the handler: what a signal costs the thread
** on its way in (tens of µs where a timer interrupt exits a virtual
** machine).  The smallest, since a thread preempted meanwhile is late for
** reasons that cost it nothing. */
#define PROF_LATENCY_RUN 8

static void note_latency (pm_Sampler *s, uint64_t entry) {
  uint64_t due = s->armed_at + s->armed_ns;
  uint64_t late = entry > due ? entry - due : 0;
  if (s->latency_n == 0 || late < s->latency_min)
    s->latency_min = late;
  if (++s->latency_n == PROF_LATENCY_RUN) {
    s->latency_ns = s->latency_min;
    s->latency_n = 0;
  }
}

/* The handler arms the next signal itself, with its own delay; the same
** delay repeats in case that signal is lost: two timers of one thread
** (the profiler's and the sampled monitors') send the same SIGPROF, and
** one that comes while the other is pending is merged into it. */
static void arm (pm_Sampler *s, uint64_t delay_ns) {
  struct itimerspec it;
#if PROF_CPU_TIMER
  if (s->fd >= 0) { /* the event's period: it fires every one of them */
    if (delay_ns != s->armed_ns)
      ioctl(s->fd, PERF_EVENT_IOC_PERIOD, &delay_ns);
    s->armed_ns = delay_ns;
    return;
  }
#endif
  it.it_value.tv_sec = (time_t)(delay_ns / 1000000000u);
  it.it_value.tv_nsec = (long)(delay_ns % 1000000000u);
  it.it_interval = it.it_value;
  s->armed_at = mono_ns();
  s->armed_ns = delay_ns;
  timer_settime(timers[s->slot], 0, &it, NULL);
}

/* The next signal comes a period away, or later when the sampler's own
** cost of this one was high: twice the signal's latency (its way out of
** the handler takes about as long as its way in), the handler (a request
** walks the stack where it goes through lua_sethook: trap.h; its wall
** time, or its CPU time where the thread was preempted in it) and the
** hook's last sample, PROF_PACE times over.  A walk also costs the program
** afterwards (it leaves the caches cold), hence 3, not 2: the program
** keeps at least half of its thread's time whatever the rate and however
** deep its stack, and a put-off sample only weighs more.  The tick timer's lateness is the
** scheduler tick's, no cost: it counts only the handler and the sample. */
#define PROF_PACE 3
static void rearm (pm_Sampler *s, uint64_t entry, uint64_t entry_cpu) {
  uint64_t cost, delay, handler = mono_ns() - entry, cpu;
  if (s->timer == PM_TIMER_PRECISE)
    note_latency(s, entry);
  if (handler >= long_ns(s) && (cpu = thread_cpu_ns() - entry_cpu) < handler)
    handler = cpu;
  cost = 2 * s->latency_ns + handler + atomic_exchange(&s->work_ns, 0);
  delay = s->period_ns;
  if (PROF_PACE * cost > delay) {
    delay = PROF_PACE * cost;
    s->throttled++;
  }
  arm(s, delay);
}

#endif

/* The slot of the timer that sent si, or -1: a POSIX timer's signal
** carries its tag, the CPU timer's the descriptor of its event. */
static int slot_of (const siginfo_t *si) {
  if (si->si_code == SI_TIMER)
    return si->si_value.sival_int >= 0 ? si->si_value.sival_int % PROF_SLOTS
                                       : -1;
#if PROF_CPU_TIMER
  if (si->si_code == POLL_IN) {
    int i;
    for (i = 0; i < PROF_SLOTS; i++)
      if (atomic_load(&cpu_fds[i]) == si->si_fd + 1)
        return i;
  }
#endif
  return -1;
}

/* Whether si came from s's timer, not from that of the slot's last
** owner. */
static int sent_by (pm_Sampler *s, const siginfo_t *si) {
  if (si->si_code == SI_TIMER)
    return atomic_load(&s->tag) == si->si_value.sival_int;
#if PROF_CPU_TIMER
  return s->fd >= 0 && s->fd == si->si_fd;
#else
  return 0;
#endif
}

/* Async-signal-safe: atomics, clock_gettime, ioctl, pm_hook_request (as
** lua_sethook is), timer_settime.  The periods counted are the thread's
** CPU time, whichever clock the timer runs on (timer_clock): a thread
** blocked or idle asks for no sample, and one held up in C code, or
** signalled only at a scheduler tick, gets a heavier sample later. */
static void on_signal (int sig, siginfo_t *si, void *uc) {
  int saved = errno, ours = 0, i = slot_of(si);
  if (i >= 0) {
    pm_Sampler *s;
    atomic_fetch_add(&inflight[i], 1);
    s = atomic_load(&slots[i]);
    if (s != NULL && sent_by(s, si)) {
      uint64_t entry = mono_ns(), entry_cpu = thread_cpu_ns();
      ours = 1;
      count_periods(s, entry_cpu);
#if PROF_TIMERS
      rearm(s, entry, entry_cpu);
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

/* Empties s's slot and waits for the handlers that may have found s there
** (they run for microseconds): no handler touches s afterwards. */
static void release_slot (pm_Sampler *s) {
  atomic_store(&slots[s->slot], NULL);
  while (atomic_load(&inflight[s->slot]) != 0)
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
static clockid_t timer_clock (const pm_Sampler *s) {
  return s->timer == PM_TIMER_TICK ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

#if PROF_CPU_TIMER
/* The CPU timer: a software event of the kernel's perf interface that
** counts the thread's CPU time (task-clock) on a high-resolution timer,
** which runs only while the thread does: a signal every period of its
** CPU time, none while it waits.  The signal comes as the event's
** descriptor becomes readable (F_SETSIG), to the thread alone; a period
** that ends in a system call sends it as the call returns, to the code
** that made it.  -1 where the kernel refuses it: perf_event_paranoid 2
** or more without CAP_PERFMON (Debian's default is 3), a container's
** seccomp profile, no perf events.  At level 2 the kernel would give its
** user-mode time alone, where a period that ends in a system call sends
** nothing and the next sample takes it, whatever code runs then: the
** time of code that lives in system calls would go to other code, so
** the tick timer is used instead, as the kernel checks it at its tick
** whatever mode the thread was in. */
static int cpu_timer_open (const pm_Sampler *s) {
  struct perf_event_attr a;
  struct f_owner_ex owner;
  int fd;
  memset(&a, 0, sizeof(a));
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof(a);
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = s->period_ns;
  a.wakeup_events = 1;
  a.disabled = 1;
  fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0)
    return -1;
  owner.type = F_OWNER_TID;
  owner.pid = (pid_t)s->tid;
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
      fcntl(fd, F_SETSIG, PROF_SIGNAL) != 0 ||
      fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
#endif

/* Creates slot i's timer, sending ev: the CPU timer where s asks for it
** and the kernel gives it, else the tick timer (every tick_period_ns, if
** s gives one); a POSIX timer on the clock s->timer says otherwise.
** Returns 0 when there is none. */
static int timer_open (pm_Sampler *s, int i, struct sigevent *ev) {
  if (s->timer == PM_TIMER_CPU) {
#if PROF_CPU_TIMER
    if ((s->fd = cpu_timer_open(s)) >= 0) {
      atomic_store(&cpu_fds[i], s->fd + 1);
      return 1;
    }
#endif
    s->timer = PM_TIMER_TICK;
  }
  if (s->timer == PM_TIMER_TICK && s->tick_period_ns != 0)
    s->period_ns = s->tick_period_ns;
  return timer_create(timer_clock(s), ev, &timers[i]) == 0;
}

/* Starts the timer that timer_open made, a period away. */
static void timer_go (pm_Sampler *s) {
  arm(s, s->period_ns);
#if PROF_CPU_TIMER
  if (s->fd >= 0)
    ioctl(s->fd, PERF_EVENT_IOC_ENABLE, 0);
#endif
}

/* Deletes s's timer; returns the CPU timer's descriptor it had, or -1 (a
** signal of that timer may still be pending: it carries the number). */
static int timer_close (pm_Sampler *s) {
  int fd = s->fd;
  if (fd < 0) {
    timer_delete(timers[s->slot]);
    return -1;
  }
#if PROF_CPU_TIMER
  atomic_store(&cpu_fds[s->slot], 0);
#endif
  close(fd);
  s->fd = -1;
  return fd;
}

/* Whether a signal taken from the pending ones was a timer's of s, the
** CPU timer's being descriptor fd (-1 if none). */
static int was_ours (const siginfo_t *si, int fd) {
  return si->si_code == SI_TIMER ||
         (fd >= 0 && si->si_code == POLL_IN && si->si_fd == fd);
}

#endif

const char *pm_sampler_start (pm_Sampler *s) {
#if PROF_TIMERS
  struct sigevent ev;
  int i;
  s->tid = this_thread();
  s->owner = pthread_self();
  atomic_store(&s->tag, -1); /* a stale tick of the slot is not s's */
  atomic_store(&s->sampling, 0);
  for (i = 0; i < PROF_SLOTS; i++) {
    pm_Sampler *none = NULL;
    if (atomic_compare_exchange_strong(&slots[i], &none, s))
      break;
  }
  if (i == PROF_SLOTS)
    return "too many profilers and sampled monitors running in this process";
  s->slot = i;
  atomic_store(
      &s->tag,
      (int)(((atomic_fetch_add(&generation, 1) + 1) % 1000000u) * PROF_SLOTS +
            (unsigned)i));
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = PROF_SIGNAL;
  ev.sigev_value.sival_int = atomic_load(&s->tag);
#ifdef sigev_notify_thread_id
  ev.sigev_notify_thread_id = (pid_t)s->tid;
#else
  ev._sigev_un._tid = (pid_t)s->tid;
#endif
  handler_acquire();
  if (!timer_open(s, i, &ev)) {
    handler_release(0); /* no tick was ever sent */
    atomic_store(&slots[i], NULL);
    return "timer_create failed";
  }
  s->has_timer = 1;
  s->cpu_mark = thread_cpu_ns();
  s->latency_ns = s->latency_min = 0;
  s->latency_n = 0;
  atomic_store(&s->work_ns, 0);
  s->armed_ns = 0;
  timer_go(s);
  return NULL;
#else
  (void)s;
  return "sampling needs POSIX timers with SIGEV_THREAD_ID (Linux)";
#endif
}

void pm_sampler_retime (pm_Sampler *s, uint64_t period_ns) {
  atomic_store(&s->next_period_ns, period_ns);
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
void pm_sampler_stop (pm_Sampler *s) {
#if PROF_TIMERS
  int i, fd;
  if (!s->has_timer)
    return;
  s->has_timer = 0;
  if (this_thread() == s->tid) {
    sigset_t set, old;
    siginfo_t si;
    struct timespec zero = {0, 0};
    sigemptyset(&set);
    sigaddset(&set, PROF_SIGNAL);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    fd = timer_close(s);
    release_slot(s); /* its timer is free to reuse */
    while (sigtimedwait(&set, &si, &zero) == PROF_SIGNAL)
      if (!was_ours(&si, fd))
        chain(PROF_SIGNAL, &si, NULL); /* not ours: hand it on */
    handler_release(0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  } else {
    struct timespec pause = {0, 500000};
    release_slot(s); /* no handler re-arms the timer after this */
    timer_close(s);
    for (i = 0; i < 100 && pending_on(s->tid); i++)
      nanosleep(&pause, NULL); /* up to 50 ms for it to run */
    handler_release(pending_on(s->tid));
  }
#else
  (void)s;
#endif
}

/* }====================================================== */
