/*
** stopwatch.c -- iterations, stopwatches, windows, periods and commits.
*/
#include "stopwatch.h"

#include <string.h>

#include "alert.h"

#define HAS(E, p) (((E)->probes & PM_BIT(p)) != 0)

static const pm_CpuTime none = {0, 0, 0};
static const pm_Allocs none_alloc = {0, 0};

/*
** {======================================================
** Cycles
** =======================================================
*/

static PM_INLINE uint64_t read_cycles (pm_Engine *E, uint32_t *cpu) {
  *cpu = PM_CPU_UNKNOWN;
  if (!HAS(E, PM_PROBE_JANK))
    return 0;
  E->cycle_reads++;
  return pm_cycles(cpu);
}

/* Cycles spent blocked (off the CPU, in declared blocking calls) before
** now, as a measure beginning now records them: a call still under way
** counts up to now.  When that call ends its whole length is added to
** blocked_cycles, so a measure that began inside it loses only the part
** after its beginning; one that begins and ends inside it loses nothing
** (busy_cycles), as the code that ran there was on the CPU. */
static PM_INLINE uint64_t blocked_at (const pm_Engine *E, uint64_t now) {
  uint64_t since = E->blocking_since_cycles;
  return E->blocked_cycles +
         (E->blocking_depth > 0 && since != 0 && now >= since ? now - since
                                                              : 0);
}

/* Cycles from since to now less those spent blocked since blocked0 (off the
** CPU: counting them would inflate the share of whoever was waiting), or
** UINT64_MAX when the counter went backwards. */
static PM_INLINE uint64_t busy_cycles (pm_Engine *E, uint64_t now,
                                       uint64_t since, uint64_t blocked0) {
  uint64_t blocked =
      E->blocked_cycles > blocked0 ? E->blocked_cycles - blocked0 : 0;
  return now >= since + blocked ? now - since - blocked : UINT64_MAX;
}

static double nonnegative (double x) {
  return x > 0 ? x : 0;
}

/* The thread's CPU time from `from` to `to`: the exact total, split into
** user and system time in the proportion getrusage saw. */
static void cputime_delta (const pm_CpuTime *from, const pm_CpuTime *to,
                           pm_CpuTime *d) {
  double user = nonnegative(to->user_us - from->user_us);
  double sys = nonnegative(to->system_us - from->system_us);
  double user_share;
  if (user + sys > 0) /* this span's own split */
    user_share = user / (user + sys);
  else if (to->user_us + to->system_us > 0) /* the thread's split so far */
    user_share = to->user_us / (to->user_us + to->system_us);
  else
    user_share = 1;
  d->cpu_us = nonnegative(to->cpu_us - from->cpu_us);
  d->user_us = d->cpu_us * user_share;
  d->system_us = d->cpu_us - d->user_us;
}

/* }====================================================== */

/*
** {======================================================
** Windows
** =======================================================
*/

/* A window is the span between two reads of the thread's CPU clock, which
** turn the cycles of the groups that ran in it into CPU time: each group
** gets its share of the window's cycles applied to the window's CPU time.
** Cycles count wall time, so a window in which the thread was preempted
** gives the lost time to whoever ran then, in proportion to their cycles;
** the shorter the mix of groups a window holds, the less that can skew.
** So a window ends at the first group change (a stopwatch started or
** stopped) after it is PM_CUT_US old, and a group that runs for long alone
** has windows of its own: a preemption (a scheduler slice, 4 ms at HZ=250)
** then lands in a window whose other groups ran 1 ms at most.  Each end is
** a clock read and a pass over the window's groups, and a host with a
** thousand plugins changes group every microsecond: a shorter cut would
** read the clock more often without sharing preempted time any better.
** At an event boundary the window stays open while it is younger than
** PM_WINDOW_US, as the read, a system call of about a microsecond, is as
** long as a short event: the events in it keep their cycles until the next
** read.  A window that holds no group's cycles (a sampled monitor's, or
** events that ran no group) shares its CPU time with no group, so it stays
** open as long as a change of group would leave it, PM_CUT_US; but a group
** that starts in it would share that time, and what was off the CPU in it
** unmarked (a host's wait for input between events), so the first change
** of group once it is PM_WINDOW_US old ends it (window_hold).  Totals stay
** exact.  What a short event cannot know at its end is its own CPU time,
** and it needs none: an event that short reaches no histogram bucket (the
** first is 1 ms, PM_CUT_US at most), and as the limit is kept under the
** watcher's jank threshold it raises no jank alert.  Snapshots, the end of
** monitoring, quiet regions and probe changes close the window exactly. */
#define PM_WINDOW_US 250.0
#define PM_CUT_US 1000.0
#define PM_TOUCHED_MAX 64 /* groups a period outside events lists (change) */

/* The age up to which an event boundary leaves a window open: us, or the
** watcher's jank threshold if lower. */
static double window_limit_us (pm_Engine *E, double us) {
  if (E->watching && E->jank_threshold > 0 && E->jank_threshold < us)
    return E->jank_threshold;
  return us;
}

/* Whether the window may stay open at now: the counter's rate is known,
** the window is younger than the limit, and it began on this OS thread (a
** CPU clock read on another thread measures that one). */
static int window_young (pm_Engine *E, uint64_t now) {
  return E->cycles_per_us > 0 && now >= E->window_cycles &&
         (double)(now - E->window_cycles) <
             window_limit_us(E,
                             E->windowed != NULL ? PM_WINDOW_US : PM_CUT_US) *
                 E->cycles_per_us &&
         E->window_thread == pm_os_thread();
}

/* Lists g in the window and adds d cycles to its meter m (g->all or
** g->self). */
static PM_INLINE void window_add (pm_Engine *E, pm_Group *g, pm_Meter *m,
                                  uint64_t d) {
  if (g->in_window != E->window) {
    g->in_window = E->window;
    g->next_windowed = E->windowed;
    E->windowed = g;
  }
  m->window_cycles += d;
  m->open_cycles += d;
}

/* The age in cycles at which a group change ends the window: never
** without cycles (no jank probe), at once until the counter's rate is
** known. */
static void window_set_limit (pm_Engine *E) {
  E->window_limit = HAS(E, PM_PROBE_JANK)
                        ? (uint64_t)(PM_CUT_US * E->cycles_per_us)
                        : UINT64_MAX;
}

/* A window an event boundary left open with no group's cycles in it:
** the first change of group once it is as old as one holding groups'
** could be left ends it (change_due), unless groups joined it before. */
static void window_hold (pm_Engine *E) {
  uint64_t limit =
      (uint64_t)(window_limit_us(E, PM_WINDOW_US) * E->cycles_per_us);
  if (HAS(E, PM_PROBE_JANK) && limit < E->window_limit)
    E->window_limit = limit;
}

/* Measures the counter's rate since monitoring began, for window_young;
** once a millisecond has passed, at each window's end.  now is read just
** before the wall clock, as where the measure began (restart): a span
** between the two reads would count in one clock and not the other. */
static void measure_rate (pm_Engine *E, uint64_t now) {
  double wall = pm_wall_us();
  if (wall - E->rate_wall >= 1000.0 && now > E->rate_cycles)
    E->cycles_per_us = (double)(now - E->rate_cycles) / (wall - E->rate_wall);
  window_set_limit(E);
}

/* The part (0..1) of the window's busy cycles that fell in the current
** period: all of them unless the window was left open at its last commit. */
static double window_in_period (pm_Engine *E, uint64_t now, uint64_t cycles) {
  uint64_t c;
  if (E->window_cycles >= E->period_cycles)
    return 1;
  c = busy_cycles(E, now, E->period_cycles, E->period_blocked);
  return c == UINT64_MAX ? 0 : c < cycles ? (double)c / (double)cycles : 1;
}

/* Adds the part share of t to acc (a total, or the time of a period). */
static void credit (pm_CpuTime *acc, const pm_CpuTime *t, double share) {
  acc->user_us += share * t->user_us;
  acc->system_us += share * t->system_us;
  acc->cpu_us += share * t->cpu_us;
}

/* Self time at most inclusive time.  Inside a declared blocking call the
** two can differ: a measure that ends there keeps the cycles so far, one
** that ends after it loses them (busy_cycles), and self measures, cut at
** every change of the innermost set, end there more often. */
static void self_cap (pm_Meter *self, const pm_Meter *all) {
  if (self->window_cycles > all->window_cycles)
    self->window_cycles = all->window_cycles;
  if (self->open_cycles > self->window_cycles)
    self->open_cycles = self->window_cycles;
}

/* Gives meter m its share of the window's CPU time dt (per_cycle: 1 / its
** busy cycles), unless the group's share is discarded: the part of earlier
** periods to total, that of this one held.  A window may list a thousand
** groups: nothing is written for a part that is empty. */
static void meter_close (pm_Meter *m, pm_CpuTime *total, const pm_CpuTime *dt,
                         double per_cycle, int keep) {
  uint64_t earlier = m->window_cycles - m->open_cycles;
  if (keep && earlier != 0)
    credit(total, dt, (double)earlier * per_cycle);
  if (keep && m->open_cycles != 0)
    credit(&m->period_time, dt, (double)m->open_cycles * per_cycle);
  m->window_cycles = 0;
  m->open_cycles = 0;
}

/* Begins a window where the thread's CPU clock read t, at a read of the
** counter made after it, from which the running context is charged.
** Linux brings a thread's runtime up to date when its CPU clock is read,
** and preempts it there once its slice is spent: read after that, the
** counter leaves the wait out of every window (in the new one it would be
** cycles of its first group, which would take that share of the CPU time
** of the groups that ran after it) and out of the counter's rate
** (measured from before it, the rate came out up to 11 times too high,
** and windows as much longer than PM_CUT_US: docs/reliability.md). */
static void window_begin (pm_Engine *E, const pm_CpuTime *t) {
  uint32_t cpu;
  E->last = E->window_cycles = read_cycles(E, &cpu);
  E->last_cpu = cpu;
  E->window_blocked = blocked_at(E, E->window_cycles);
  E->window_time = *t;
  E->window_thread = pm_os_thread();
}

/* Ends the window at now: reads the thread's CPU time and gives each group
** its share of the window's cycles applied to it.  The share of cycles run
** in earlier periods goes to the totals; that of this period is held until
** its commit, so that a snapshot inside an event leaves the event out.  A
** share above 100% (counter reset, unsynchronised CPUs) is discarded.
** Without the jank probe no cycles are counted, so there is nothing to
** share, and no clock is read: a monitor of ticks alone would otherwise pay
** a system call at every event boundary. */
static void window_close (pm_Engine *E, uint64_t now) {
  pm_CpuTime now_time, dt;
  uint64_t cycles;
  double part, per_cycle;
  pm_Group *g = E->windowed, *next;
  if (!HAS(E, PM_PROBE_JANK))
    return;
  cycles = busy_cycles(E, now, E->window_cycles, E->window_blocked);
  pm_cputime(&now_time);
  cputime_delta(&E->window_time, &now_time, &dt);
  if (cycles == UINT64_MAX)
    cycles = 0; /* the counter went backwards: discard the window */
  per_cycle = cycles > 0 ? 1.0 / (double)cycles : 0;
  for (; g != NULL; g = next) {
    next = g->next_windowed;
    /* a share above 100% is the inclusive one's: its self time goes too */
    int keep = cycles > 0 && g->all.window_cycles <= cycles;
    self_cap(&g->self, &g->all);
    meter_close(&g->all, &g->total.cpu, &dt, per_cycle, keep);
    meter_close(&g->self, &g->total.self, &dt, per_cycle, keep);
  }
  part = cycles > 0 ? window_in_period(E, now, cycles) : 1;
  credit(&E->process.cpu, &dt, 1 - part);
  credit(&E->process.self, &dt, 1 - part); /* all it runs is its own */
  credit(&E->period_time, &dt, part);
  if (cycles > 0)
    E->cpu_per_cycle = dt.cpu_us / (double)cycles;
  E->windowed = NULL;
  E->window++;
  window_begin(E, &now_time);
  measure_rate(E, E->window_cycles);
}

/* }====================================================== */

/*
** {======================================================
** Contexts: charges and flushes
** =======================================================
*/

/* Adds what was allocated from since to now to acc. */
static void allocs_add (pm_Allocs *acc, const pm_Allocs *now,
                        const pm_Allocs *since) {
  acc->bytes += now->bytes - since->bytes;
  acc->count += now->count - since->count;
}

static void touch (pm_Engine *E, pm_Group *g) {
  if (g->touched_period != E->period) {
    g->touched_period = E->period;
    g->next_touched = E->touched;
    E->touched = g;
    E->ntouched++;
  }
}

/* Adds d cycles to c, which the next flush gives its groups. */
static PM_INLINE void charge (pm_Engine *E, pm_Ctx *c, uint64_t d) {
  c->cycles += d;
  if (c->flush != E->flushes) {
    c->flush = E->flushes;
    c->next_charged = E->charged;
    E->charged = c;
  }
}

/* A change where more than the clock matters (E->slow): the cycles of
** perfmon's own work, of a quiet region and of a blocking call's wait (the
** context it began in, while it lasts) go to no context; the memory probe
** counts what the context allocated. */
static PM_NOINLINE void charge_slow (pm_Engine *E, uint64_t now, uint32_t cpu) {
  pm_Ctx *c = E->ctx;
  int keep = now >= E->last && cpu == E->last_cpu && !E->quiet && !E->own &&
             !(E->blocking_depth > 0 && c == E->blocking_ctx);
  charge(E, c, keep ? now - E->last : 0);
  if (HAS(E, PM_PROBE_MEMORY)) {
    allocs_add(&c->alloc, &E->allocs, &E->last_alloc);
    E->last_alloc = E->allocs;
  }
}

static void slow_update (pm_Engine *E) {
  E->slow =
      E->blocking_depth > 0 || E->quiet || E->own || HAS(E, PM_PROBE_MEMORY);
}

/* Charges the running context with the cycles from the last change to
** now: those of a counter that went backwards or moved to another CPU are
** dropped. */
static PM_INLINE void settle (pm_Engine *E, uint64_t now, uint32_t cpu) {
  if (PM_UNLIKELY(E->slow))
    charge_slow(E, now, cpu);
  else if (now >= E->last && cpu == E->last_cpu)
    charge(E, E->ctx, now - E->last);
  E->last = now;
  E->last_cpu = cpu;
}

/* Settles at the current instant, where monitors are open. */
static void settle_now (pm_Engine *E) {
  uint32_t cpu;
  uint64_t now;
  if (E->monitors > 0) {
    now = read_cycles(E, &cpu);
    settle(E, now, cpu);
  }
}

/* Gives c's cycles, ticks, memory and blocking time to its groups: every
** group running (inclusive), its self set's (self); the ticks to
** the groups whose stopwatches c started, once for each call into it. */
static void flush_ctx (pm_Engine *E, pm_Ctx *c) {
  int jank = HAS(E, PM_PROBE_JANK) && !E->quiet;
  int memory = HAS(E, PM_PROBE_MEMORY);
  const pm_Ctx *b;
  int i;
  for (b = c->base; b != NULL; b = b->up)
    for (i = 0; i < b->nadd; i++) {
      pm_Group *g = b->add[i];
      touch(E, g);
      g->recent_cycles += c->cycles;
      if (jank)
        window_add(E, g, &g->all, c->cycles);
      g->recent_blocking += c->blocking;
      if (memory)
        allocs_add(&g->recent_alloc, &c->alloc, &none_alloc);
    }
  if (c->base == c && HAS(E, PM_PROBE_TICKS))
    for (i = 0; i < c->nadd; i++)
      c->add[i]->recent_ticks += c->entries;
  for (i = 0; c->self != NULL && i < c->self->n; i++) {
    pm_Group *g = c->self->g[i];
    if (jank)
      window_add(E, g, &g->self, c->cycles);
    if (memory)
      allocs_add(&g->recent_self_alloc, &c->alloc, &none_alloc);
  }
  c->cycles = c->entries = 0;
  c->alloc = none_alloc;
  c->blocking = 0;
}

/* Every context charged since the last flush gives its groups their due.
** The root has none: it passes for listed already, and what it is charged
** goes nowhere. */
static void flush (pm_Engine *E) {
  pm_Ctx *c = E->charged;
  E->charged = NULL;
  E->root.flush = ++E->flushes;
  for (; c != NULL; c = c->next_charged)
    flush_ctx(E, c);
}

enum { COMMIT_GAP, COMMIT_EVENT, COMMIT_EXACT }; /* commit's kinds */
static void commit (pm_Engine *E, int kind);
static void sample_mark (pm_Engine *E);
static void alloc_arm (pm_Engine *E);
static void alloc_drop (pm_Engine *E);
static void sample_tail (pm_Engine *E, uint64_t now, double per_cycle,
                         double bound);

/* A change past the window's limit ends the window there; past a held
** window's (window_hold), only if no group joined it: one that did runs
** on to PM_CUT_US, as any window holding groups.  Outside events
** a period ends only at a snapshot, and a window's end walks every group
** the period touched: a host that runs many groups between snapshots
** would pay for all of them at each window.  So there the window's end
** commits the period once the list is long, as a snapshot would. */
static PM_NOINLINE void change_due (pm_Engine *E, uint64_t now) {
  flush(E);
  if (E->ntouched > PM_TOUCHED_MAX && !E->in_event[E->loop]) {
    commit(E, COMMIT_EXACT);
    return;
  }
  window_set_limit(E);
  if (E->windowed == NULL || now - E->window_cycles >= E->window_limit)
    window_close(E, now);
}

/* The change of group at the heart of the hook: the context running is
** charged up to now, and n runs from now on. */
static PM_INLINE void change (pm_Engine *E, pm_Ctx *n) {
  uint32_t cpu;
  uint64_t now = read_cycles(E, &cpu);
  settle(E, now, cpu);
  E->ctx = n;
  if (PM_UNLIKELY(now - E->window_cycles >= E->window_limit))
    change_due(E, now);
}

/* A call enters n from the running context, which it returns. */
static PM_INLINE pm_Ctx *enter (pm_Engine *E, pm_Ctx *n) {
  pm_Ctx *from = E->ctx;
  if (PM_UNLIKELY(n == NULL))
    return NULL; /* no memory: it stays in its caller's context */
  n->entries++;
  change(E, n);
  return from;
}

pm_Ctx *pm_sw_enter (pm_Engine *E, const pm_Set *s) {
  return enter(E, pm_ctx_child(E, E->ctx, s));
}

pm_Ctx *pm_sw_enter_own (pm_Engine *E, const pm_Set *s) {
  return enter(E, pm_ctx_find(E, E->ctx, s, s));
}

void pm_sw_leave (pm_Engine *E, pm_Ctx *to, uint64_t iter) {
  change(E, pm_sw_valid(E, to, iter));
}

void pm_sw_change (pm_Engine *E, pm_Ctx *to) {
  change(E, to);
}

pm_Ctx *pm_sw_child (pm_Engine *E, pm_Ctx *c, const pm_Set *s) {
  pm_Ctx *n = pm_ctx_child(E, c, s);
  if (n == NULL)
    return c;
  n->entries++;
  charge(E, n, 0); /* listed: its ticks are flushed even if it never runs */
  return n;
}

/* Nothing runs: the iteration moves on, and every frame's context is
** stale (pm_sw_valid): none can be gone back to, so that many can go.
** A blocking call under way was begun in one of them: what runs from now
** on is called back, on the CPU, even in the same (base, set), whether or
** not its contexts went (pm_ctx_free forgets it). */
static void cancel (pm_Engine *E) {
  E->iter++;
  E->ctx = &E->root;
  E->blocking_ctx = NULL;
  if (PM_UNLIKELY(E->nctxs > PM_CTX_KEEP))
    pm_ctx_free(E);
}

/* }====================================================== */

/*
** {======================================================
** Periods and commits
** =======================================================
*/

/* A period is the span between two commits (event boundaries): what each
** group did in an event is committed at its end.  Its CPU time is what the
** windows closed in it gave it, plus, for the part in a window left open,
** an estimate at the last window's rate, capped at the wall time: that part
** is short, so the estimate only ever decides that it is short. */

/* Counts an event that took cpu_us (self_us of it in the innermost
** frame): the counts and sums make the buckets of durations and
** self_durations histograms with a total (OpenMetrics' _count and _sum). */
static void histogram (pm_Stats *st, double cpu_us, double self_us) {
  double bound = 1000.0;
  int k;
  st->events++;
  st->event_us += cpu_us;
  st->self_event_us += self_us;
  for (k = 0; k < PM_DURATIONS && cpu_us >= bound; k++, bound *= 2) {
    st->durations[k]++;
    st->self_durations[k] += self_us >= bound;
  }
}

/* The CPU time of meter m in the period ending: what the windows closed in
** it gave, and its cycles in the window still open at per_cycle. */
static double period_us (pm_Meter *m, double per_cycle) {
  return m->period_time.cpu_us + (double)m->open_cycles * per_cycle;
}

/* What a group did in the period ending: ticks, blocking time, and for an
** event it ran in its histogram entry; for any event the watcher's check.
** In a quiet region (listeners run) it is dropped. */
static void commit_group (pm_Engine *E, pm_Group *g, double per_cycle,
                          int is_event) {
  double cpu_us, self_us;
  self_cap(&g->self, &g->all);
  cpu_us = period_us(&g->all, per_cycle);
  self_us = period_us(&g->self, per_cycle);
  if (g->recent_samples > 0) { /* sampled: bracketed by the event */
    cpu_us = g->sample_event_us;
    self_us = g->sample_self_us;
  }
  /* most periods close no window, and a group's totals are lines of its
  ** own that a thousand groups would each bring in at every event */
  if (g->all.period_time.cpu_us != 0 || g->self.period_time.cpu_us != 0) {
    credit(&g->total.cpu, &g->all.period_time, 1);
    credit(&g->total.self, &g->self.period_time, 1);
    g->all.period_time = g->self.period_time = none;
  }
  if (!E->quiet) {
    g->total.ticks += g->recent_ticks;
    g->total.samples += g->recent_samples;
    g->total.self_samples += g->recent_self_samples;
    if (g->recent_blocking != 0)
      g->total.blocking_us += g->recent_blocking;
    if (HAS(E, PM_PROBE_MEMORY)) {
      allocs_add(&g->total.alloc, &g->recent_alloc, &none_alloc);
      allocs_add(&g->total.self_alloc, &g->recent_self_alloc, &none_alloc);
    }
    if (is_event) {
      /* an event it ran in: a group only restarted at the boundary, or
      ** not measured (no jank probe), has no cycles or samples in it */
      if (g->recent_cycles > 0 || g->recent_samples > 0)
        histogram(&g->total, cpu_us, self_us);
      if (E->watching)
        pm_alert_check(E, g, cpu_us, self_us, g->recent_blocking);
    }
  }
  g->recent_cycles = 0;
  g->recent_samples = g->recent_self_samples = 0;
  g->sample_event_us = g->sample_self_us = 0;
  g->recent_blocking = 0;
  g->recent_ticks = 0;
  if (HAS(E, PM_PROBE_MEMORY))
    g->recent_alloc = g->recent_self_alloc = none_alloc;
  /* the cycles stay in the window, for the totals */
  g->all.open_cycles = g->self.open_cycles = 0;
}

/* Ends the current period.  The context running is charged up to this
** instant: the part so far is committed, the rest goes to the next period. */
static void commit (pm_Engine *E, int kind) {
  uint32_t cpu;
  uint64_t now = read_cycles(E, &cpu);
  uint64_t cycles = busy_cycles(E, now, E->period_cycles, E->period_blocked);
  uint64_t open;
  int is_event = kind == COMMIT_EVENT;
  double per_cycle, event_us;
  pm_Group *g, *next;
  settle(E, now, cpu);
  flush(E);
  if (kind == COMMIT_EXACT || !window_young(E, now))
    window_close(E, now);
  else if (E->windowed == NULL)
    window_hold(E);
  per_cycle = E->cpu_per_cycle;
  if (per_cycle * E->cycles_per_us > 1)
    per_cycle = 1 / E->cycles_per_us;
  /* the period's busy cycles in the window still open (none if just
  ** closed: the next began after now, window_begin) */
  open = E->window_cycles >= E->period_cycles
             ? busy_cycles(E, now, E->window_cycles, E->window_blocked)
             : cycles;
  if (open == UINT64_MAX)
    open = 0;
  event_us = E->period_time.cpu_us + (double)open * per_cycle;
  if (is_event && HAS(E, PM_PROBE_JANK) && cycles != UINT64_MAX)
    histogram(&E->process, event_us, event_us); /* all the process's */
  if (is_event && HAS(E, PM_PROBE_TICKS))
    E->process.ticks++; /* the process is entered once per event */
  /* every sample is the process's, and its own (self) */
  E->process.samples += E->samples - E->samples_committed;
  E->process.self_samples += E->samples - E->samples_committed;
  E->samples_committed = E->samples;
  if (is_event)
    sample_tail(E, now, per_cycle, event_us - E->sample_event_sum);
  E->sample_event_sum = 0;
  /* all it allocates is its own, listeners and perfmon's tables included */
  if (HAS(E, PM_PROBE_MEMORY)) {
    allocs_add(&E->process.alloc, &E->allocs, &E->period_alloc);
    allocs_add(&E->process.self_alloc, &E->allocs, &E->period_alloc);
    E->period_alloc = E->allocs;
  }
  g = E->touched;
  E->touched = NULL;
  E->ntouched = 0;
  E->period++;
  if (E->period_time.cpu_us != 0) { /* a window closed in the period */
    credit(&E->process.cpu, &E->period_time, 1);
    credit(&E->process.self, &E->period_time, 1);
    E->period_time = none;
  }
  for (; g != NULL; g = next) {
    next = g->next_touched;
    commit_group(E, g, per_cycle, is_event);
  }
  E->period_cycles = now;
  E->period_blocked = blocked_at(E, now);
}

/* Marks now as the beginning of the period, the window, the measure of
** the counter's rate and, under a sampled monitor, the samples' span: a
** sample counts from where the process does. */
static void restart (pm_Engine *E) {
  pm_CpuTime t;
  pm_cputime(&t); /* first: see window_begin */
  window_begin(E, &t);
  E->rate_wall = pm_wall_us();
  E->period_cycles = E->rate_cycles = E->window_cycles;
  E->period_blocked = E->window_blocked;
  E->last_alloc = E->period_alloc = E->allocs;
  window_set_limit(E);
  if (E->sampled)
    sample_mark(E);
}

void pm_sw_start (pm_Engine *E) {
  E->period++;
  E->window++;
  E->root.flush = ++E->flushes;
  cancel(E);
  E->touched = NULL;
  E->ntouched = 0;
  E->windowed = NULL;
  E->charged = NULL;
  slow_update(E);
  restart(E);
}

void pm_sw_stop (pm_Engine *E) {
  commit(E, COMMIT_EXACT);
  cancel(E);
  if (E->sampled)
    sample_mark(E); /* the last exact monitor went: samples count from here */
}

/* Quiet regions are cut at both ends so that the time inside is dropped,
** not shared with what ran before or after. */
void pm_sw_quiet (pm_Engine *E, int on) {
  if (E->monitors > 0)
    commit(E, COMMIT_EXACT);
  if (E->sampled)
    sample_mark(E); /* what ran inside goes to no group */
  alloc_drop(E); /* what was allocated inside is no group's */
  E->quiet = on;
  slow_update(E);
}

void pm_sw_snapshot (pm_Engine *E) {
  if (E->monitors > 0 && !E->in_event[E->loop])
    commit(E, COMMIT_EXACT);
}

void pm_sw_own (pm_Engine *E, int on) {
  uint32_t cpu;
  pm_CpuTime now, d;
  uint64_t c;
  if (on) {
    /* inside a blocking call its cycles are left out already */
    if (E->monitors == 0 || E->blocking_depth > 0)
      return;
    settle_now(E);
    E->own = 1;
    E->own_cycles = E->last;
    pm_cputime(&E->own_time);
    E->count_allocs = 0;
    slow_update(E);
    return;
  }
  if (!E->own)
    return;
  /* its cycles count as blocked, its CPU time moves the window's start;
  ** the CPU clock first, so that a preemption there is in its cycles
  ** (window_begin) */
  pm_cputime(&now);
  c = read_cycles(E, &cpu);
  settle(E, c, cpu);
  E->own = 0;
  slow_update(E);
  if (c >= E->own_cycles)
    E->blocked_cycles += c - E->own_cycles;
  cputime_delta(&E->own_time, &now, &d);
  E->window_time.cpu_us += d.cpu_us;
  E->window_time.user_us += d.user_us;
  E->window_time.system_us += d.system_us;
  E->sample_time.cpu_us += d.cpu_us;
  E->sample_time.user_us += d.user_us;
  E->sample_time.system_us += d.system_us;
  E->count_allocs = HAS(E, PM_PROBE_MEMORY);
}

/* Changing probes changes what a measure means: commit what was measured
** so far and cancel the measures under way, so none mixes the two. */
void pm_sw_probes (pm_Engine *E, unsigned probes, int delta) {
  unsigned before = E->probes;
  int p;
  if (E->monitors > 0)
    commit(E, COMMIT_EXACT);
  for (p = 0; p < PM_NPROBES; p++)
    if (probes & PM_BIT(p)) {
      E->probe_refs[p] += delta;
      if (E->probe_refs[p] > 0)
        E->probes |= PM_BIT(p);
      else
        E->probes &= ~PM_BIT(p);
    }
  if (E->probes != before) {
    cancel(E);
    if (E->monitors > 0 && ((E->probes ^ before) & PM_BIT(PM_PROBE_JANK)))
      restart(E); /* cycles and the CPU time were not read without it */
    if ((E->probes ^ before) & PM_BIT(PM_PROBE_CHUNKS))
      pm_functions_forget(E);
    E->count_allocs = HAS(E, PM_PROBE_MEMORY);
    slow_update(E);
  }
  alloc_arm(E);
}

/* }====================================================== */

/*
** {======================================================
** Events, nested loops, blocking calls
** =======================================================
*/

static void mark (pm_Engine *E, int kind) {
  if (E->monitors > 0)
    commit(E, kind);
  cancel(E);
}

int pm_sw_event_begin (pm_Engine *E) {
  if (E->in_event[E->loop])
    return PM_EMISUSE;
  mark(E, COMMIT_GAP);
  E->in_event[E->loop] = 1;
  pm_alert_event_begin(E);
  return PM_OK;
}

int pm_sw_event_end (pm_Engine *E) {
  if (!E->in_event[E->loop])
    return PM_EMISUSE;
  mark(E, COMMIT_EVENT);
  E->in_event[E->loop] = 0;
  return PM_OK;
}

int pm_sw_nested_enter (pm_Engine *E) {
  if (E->loop + 1 == PM_MAX_LOOPS)
    return PM_EMISUSE;
  mark(E, E->in_event[E->loop] ? COMMIT_EVENT : COMMIT_GAP);
  E->in_event[++E->loop] = 0;
  return PM_OK;
}

/* An event left open inside the nested loop ends with it. */
int pm_sw_nested_leave (pm_Engine *E) {
  if (E->loop == 0) {
    if (E->loop_orphans == 0)
      return PM_EMISUSE;
    E->loop_orphans--;
    return PM_OK;
  }
  mark(E, E->in_event[E->loop] ? COMMIT_EVENT : COMMIT_GAP);
  E->in_event[E->loop--] = 0;
  return PM_OK;
}

/* A switch of loop level ends the stretch of the level left, as entering
** and leaving a nested loop do: an event open there counts what ran up to
** now, and it goes on when the level comes back. */
uint64_t pm_sw_nested_pause (pm_Engine *E, int n) {
  uint64_t events = 0;
  int i;
  if (n <= 0 || n > E->loop)
    return 0;
  mark(E, E->in_event[E->loop] ? COMMIT_EVENT : COMMIT_GAP);
  for (i = 0; i < n; i++, E->loop--) {
    events |= (uint64_t)E->in_event[E->loop] << i;
    E->in_event[E->loop] = 0;
  }
  return events;
}

int pm_sw_nested_resume (pm_Engine *E, int n, uint64_t events) {
  int i;
  if (n <= 0)
    return 1;
  if (E->loop + n >= PM_MAX_LOOPS)
    return 0;
  mark(E, E->in_event[E->loop] ? COMMIT_EVENT : COMMIT_GAP);
  for (i = n - 1; i >= 0; i--)
    E->in_event[++E->loop] = (unsigned char)((events >> i) & 1);
  return 1;
}

void pm_sw_nested_orphan (pm_Engine *E, int n) {
  if (n > 0)
    E->loop_orphans += n;
}

/* The thread starts waiting: from now its cycles are blocked, and so are
** those of the context it waits in, until the wait is over; code it calls
** meanwhile (a callback in another context) runs on the CPU. */
static void blocking_open (pm_Engine *E) {
  uint32_t cpu;
  E->blocking_since = pm_wall_us();
  E->blocking_since_cycles = read_cycles(E, &cpu);
  if (E->monitors > 0)
    settle(E, E->blocking_since_cycles, cpu);
  E->blocking_ctx = E->ctx;
}

/* The wait is over: its cycles join the blocked ones, its wall time the
** blocking time of the groups running. */
static void blocking_close (pm_Engine *E) {
  uint32_t cpu;
  uint64_t now;
  if (E->monitors == 0)
    return;
  now = read_cycles(E, &cpu);
  settle(E, now, cpu);
  E->blocked_cycles = blocked_at(E, now);
  if (HAS(E, PM_PROBE_BLOCKING)) {
    double d = pm_wall_us() - E->blocking_since;
    E->blocking_total += d;
    E->process.blocking_us += d;
    E->ctx->blocking += d;
    charge(E, E->ctx, 0);
  }
}

int pm_sw_blocking_begin (pm_Engine *E) {
  if (E->blocking_depth++ == 0)
    blocking_open(E);
  slow_update(E);
  return PM_OK;
}

int pm_sw_blocking_end (pm_Engine *E) {
  if (E->blocking_depth == 0) {
    if (E->blocking_orphans == 0)
      return PM_EMISUSE;
    E->blocking_orphans--;
    return PM_OK;
  }
  if (E->blocking_depth == 1)
    blocking_close(E);
  E->blocking_depth--;
  slow_update(E);
  return PM_OK;
}

void pm_sw_blocking_pause (pm_Engine *E, int n) {
  if (n <= 0 || n > E->blocking_depth)
    return;
  if (n == E->blocking_depth)
    blocking_close(E);
  E->blocking_depth -= n;
  slow_update(E);
}

void pm_sw_blocking_orphan (pm_Engine *E, int n) {
  if (n > 0)
    E->blocking_orphans += n;
}

void pm_sw_blocking_resume (pm_Engine *E, int n) {
  if (n <= 0)
    return;
  if (E->blocking_depth == 0)
    blocking_open(E);
  E->blocking_depth += n;
  slow_update(E);
}

/* }====================================================== */

/*
** {======================================================
** Samples
** =======================================================
*/

/* A sample stands for the CPU time since the one before, all of it: the
** code it finds running is taken to have run all along.  The samples come
** every so much CPU time, so each group is found in proportion to the CPU
** time it takes, and its total is unbiased.  That time goes into the
** period's (pm_Meter.period_time), where a stopwatch's windows put
** theirs, and so to the totals at the commit.
**
** A group's time in one event, for its histogram and the watcher, is
** bracketed by the event instead: of a sample's span only the part after
** the event began counts (by the cycle counter), and the time after the
** event's last sample goes to the groups that sample saw, as if they ran
** to the end.  So an event that one plugin spends janking is its length,
** however few samples fell in it (a thread that shares its CPU is
** sampled less regularly). */

static void sample_mark (pm_Engine *E) {
  uint32_t cpu;
  pm_cputime(&E->sample_time);
  E->sample_cycles = pm_cycles(&cpu);
  E->sample_wall = pm_wall_us();
}

/* The part (0..1) of the sample's span, prev to now (monotonic µs), that
** the sample window takes: its CPU time counts there (as missed where no
** group is charged).  A span that began before the window gives it the
** CPU time since it opened (read then); the window ends at the first
** sample past its end, which gives it nothing, as no clock says how much
** of that span ran before the end: the window's figures cover it up to
** its last sample (`last`), exactly. */
static void window_part (pm_Engine *E, double prev, double now, int charge) {
  pm_SampleWindow *w = &E->sample_window;
  double dt = E->sample_dt.cpu_us, us = dt;
  E->sample_part = 0;
  if (!w->open || now < w->since)
    return;
  if (now > w->until) {
    w->open = 0;
    return;
  }
  if (prev < w->since) {
    us = E->sample_time.cpu_us - w->since_cpu;
    us = us < 0 ? 0 : us > dt ? dt : us;
  }
  E->sample_part = dt > 0 ? us / dt : 1;
  w->last = now;
  w->cpu_us += us;
  w->samples++;
  if (!charge)
    w->missed_us += us;
}

void pm_sw_window (pm_Engine *E, double window_us) {
  pm_SampleWindow *w = &E->sample_window;
  pm_CpuTime cpu;
  pm_cputime(&cpu);
  w->open = 1;
  w->id++;
  w->since = pm_wall_us();
  w->since_cpu = cpu.cpu_us;
  w->until = w->since + window_us;
  w->last = w->since;
  w->cpu_us = w->missed_us = 0;
  w->samples = 0;
}

void pm_sw_window_end (pm_Engine *E) {
  double now = pm_wall_us();
  if (!E->sample_window.open)
    return;
  E->sample_window.open = 0;
  if (now < E->sample_window.until)
    E->sample_window.until = now;
}

/* g's figures in the window, those of an older one dropped. */
static pm_WindowStats *window_of (pm_Engine *E, pm_Group *g) {
  if (g->sample_window.id != E->sample_window.id) {
    memset(&g->sample_window, 0, sizeof(g->sample_window));
    g->sample_window.id = E->sample_window.id;
  }
  return &g->sample_window;
}

void pm_sw_sampled (pm_Engine *E, int on) {
  E->sampled = on;
  sample_mark(E);
  alloc_arm(E);
}

/* The CPU time since the last sample: whether the walk charges it. */
static int sample_time (pm_Engine *E, int charge) {
  pm_CpuTime now;
  double bound;
  uint64_t cycles, since = E->sample_cycles;
  uint32_t cpu;
  double wall = E->sample_wall;
  cycles = pm_cycles(&cpu);
  pm_cputime(&now);
  cputime_delta(&E->sample_time, &now, &E->sample_dt);
  E->sample_time = now;
  E->sample_cycles = cycles;
  E->sample_wall = pm_wall_us();
  window_part(E, wall, E->sample_wall, charge);
  if (!charge || E->quiet || !HAS(E, PM_PROBE_JANK))
    return 0;
  E->sample_event_us = E->sample_dt.cpu_us;
  if (since < E->period_cycles) /* the span began before the period */
    E->sample_event_us *=
        cycles > E->period_cycles
            ? (double)(cycles - E->period_cycles) / (double)(cycles - since)
            : 0;
  /* no more than the CPU time of the event not given yet: a span the
  ** machine held back, split at the event's start by wall time, reads more
  ** where the thread was preempted in the event */
  bound = E->period_time.cpu_us + now.cpu_us - E->window_time.cpu_us -
          E->sample_event_sum;
  if (E->sample_event_us > bound)
    E->sample_event_us = nonnegative(bound);
  E->sample_event_sum += E->sample_event_us;
  E->samples++;
  return 1;
}

/* The allocations due: whether the walk charges them.  A block's share of
** a point is fractional; the walk charges whole blocks and carries the
** rest to the next. */
static int sample_allocs (pm_Engine *E, int charge) {
  double blocks = E->alloc_due_blocks + E->alloc_carry;
  int due = E->alloc_due.bytes != 0;
  E->alloc_walk = none_alloc;
  if (due && charge && !E->quiet && HAS(E, PM_PROBE_MEMORY)) {
    E->alloc_walk.bytes = E->alloc_due.bytes;
    E->alloc_walk.count = (uint64_t)blocks;
    E->alloc_carry = blocks - (double)E->alloc_walk.count;
    E->alloc_walks++;
  }
  E->alloc_due = none_alloc;
  E->alloc_due_blocks = 0;
  return E->alloc_walk.bytes != 0;
}

int pm_sw_sample (pm_Engine *E, int allocs, int charge) {
  E->sample_allocs = allocs;
  return allocs ? sample_allocs(E, charge) : sample_time(E, charge);
}

/* g on the walk's stack (self: in the set that owns its self time),
** charged once a walk whatever its frames: the CPU time since the last
** sample, or the allocations due. */
static void sample_time_to (pm_Engine *E, pm_Group *g, int self) {
  if (g->sample_stamp != E->samples) {
    g->sample_stamp = E->samples;
    g->recent_samples++;
    touch(E, g);
    credit(&g->all.period_time, &E->sample_dt, 1);
    g->sample_event_us += E->sample_event_us;
    if (E->sample_part > 0) {
      pm_WindowStats *w = window_of(E, g);
      w->cpu_us += E->sample_dt.cpu_us * E->sample_part;
      w->samples++;
    }
  }
  if (self && g->sample_self != E->samples) {
    g->recent_self_samples++;
    g->sample_self = E->samples;
    credit(&g->self.period_time, &E->sample_dt, 1);
    g->sample_self_us += E->sample_event_us;
    if (E->sample_part > 0) {
      pm_WindowStats *w = window_of(E, g);
      w->self_us += E->sample_dt.cpu_us * E->sample_part;
      w->self_samples++;
    }
  }
}

static void sample_allocs_to (pm_Engine *E, pm_Group *g, int self) {
  if (g->alloc_stamp != E->alloc_walks) {
    g->alloc_stamp = E->alloc_walks;
    touch(E, g);
    allocs_add(&g->recent_alloc, &E->alloc_walk, &none_alloc);
  }
  if (self && g->alloc_self != E->alloc_walks) {
    g->alloc_self = E->alloc_walks;
    allocs_add(&g->recent_self_alloc, &E->alloc_walk, &none_alloc);
  }
}

void pm_sw_sample_set (pm_Engine *E, const pm_Set *s, int self) {
  int k;
  for (k = 0; k < s->n; k++)
    if (E->sample_allocs)
      sample_allocs_to(E, s->g[k], self);
    else
      sample_time_to(E, s->g[k], self);
}

/* At an event's end: the time since its last sample, at per_cycle, to the
** groups that sample saw; no more than bound, the event's CPU time that
** its samples did not give. */
static void sample_tail (pm_Engine *E, uint64_t now, double per_cycle,
                         double bound) {
  double us;
  pm_Group *g;
  if (!E->sampled || E->sample_cycles < E->period_cycles ||
      now < E->sample_cycles)
    return; /* no sample in this event */
  us = (double)(now - E->sample_cycles) * per_cycle;
  if (us > bound)
    us = nonnegative(bound);
  for (g = E->touched; g != NULL; g = g->next_touched)
    if (g->sample_stamp == E->samples) {
      g->sample_event_us += us;
      if (g->sample_self == E->samples)
        g->sample_self_us += us;
    }
}

/* Sampled mode's memory: a profile of allocations by bytes, as heap
** profilers take theirs.  The line of bytes allocated (allocs.bytes) is cut
** into strides, each holding one point drawn at random in it; the
** allocation that covers a point is sampled, at the walk that follows, and
** the point stands for a stride of bytes.  A stride of an allocation's
** bytes holds a point with probability 1 whoever made it, so a group's
** bytes are unbiased, and they are good to a few points: a group that
** allocates on its own for n strides gets n points, less or more one,
** and one that shares them gets each with the chance of its share (each
** point drawn afresh, so that no rhythm of the program's allocations can
** line up with the strides).  An allocation's blocks are counted the
** same way: a point in a new block of size bytes stands for stride / size
** blocks, one on average for each block made. */

/* xorshift64*: the draws need only be independent of the program. */
static uint64_t draw (pm_Engine *E, uint64_t n) {
  uint64_t x = E->alloc_seed;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  E->alloc_seed = x;
  return (x * 0x2545F4914F6CDD1Du >> 11) % n;
}

static void alloc_drop (pm_Engine *E) {
  E->alloc_due = none_alloc;
  E->alloc_due_blocks = 0;
}

/* Points are drawn while a sampled monitor is open and the memory probe
** held. */
static void alloc_arm (pm_Engine *E) {
  uint32_t cpu;
  if (!E->sampled || !HAS(E, PM_PROBE_MEMORY)) {
    E->alloc_next = UINT64_MAX;
    alloc_drop(E);
    return;
  }
  if (E->alloc_next != UINT64_MAX)
    return;
  if (E->alloc_stride == 0)
    E->alloc_stride = PM_ALLOC_STRIDE;
  if (E->alloc_seed == 0)
    E->alloc_seed = (pm_cycles(&cpu) ^ (uint64_t)(uintptr_t)E) | 1;
  E->alloc_stratum = E->allocs.bytes;
  E->alloc_next = E->alloc_stratum + draw(E, E->alloc_stride);
}

void pm_sw_alloc_cross (pm_Engine *E, size_t size, int block) {
  uint64_t k = 0;
  while (E->alloc_next < E->allocs.bytes) {
    k++;
    E->alloc_stratum += E->alloc_stride;
    E->alloc_next = E->alloc_stratum + draw(E, E->alloc_stride);
  }
  E->alloc_due.bytes += k * E->alloc_stride;
  if (block && size > 0)
    E->alloc_due_blocks += (double)k * (double)E->alloc_stride / (double)size;
}

/* }====================================================== */
