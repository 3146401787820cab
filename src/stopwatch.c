/*
** stopwatch.c -- iterations, stopwatches, windows, periods and commits.
*/
#include "stopwatch.h"

#include "alert.h"
#include "perfmon.h"

#define HAS(S, p) (((S)->probes & PM_BIT(p)) != 0)

static const pm_CpuTime none = {0, 0, 0};
static const pm_Allocs none_alloc = {0, 0};

/*
** {======================================================
** Cycles
** =======================================================
*/

static uint64_t read_cycles (pm_State *S, uint32_t *cpu) {
  *cpu = PM_CPU_UNKNOWN;
  return HAS(S, PM_PROBE_JANK) ? pm_cycles(cpu) : 0;
}

/* Cycles spent blocked (off the CPU, in declared blocking calls) before
** now, as a measure beginning now records them: a call still under way
** counts up to now.  When that call ends its whole length is added to
** blocked_cycles, so a measure that began inside it loses only the part
** after its beginning; one that begins and ends inside it loses nothing
** (busy_cycles), as the code that ran there was on the CPU. */
static uint64_t blocked_at (const pm_State *S, uint64_t now) {
  uint64_t since = S->blocking_since_cycles;
  return S->blocked_cycles +
         (S->blocking_depth > 0 && since != 0 && now >= since ? now - since
                                                              : 0);
}

/* Cycles from since to now less those spent blocked since blocked0 (off the
** CPU: counting them would inflate the share of whoever was waiting), or
** UINT64_MAX when the counter went backwards. */
static uint64_t busy_cycles (pm_State *S, uint64_t now, uint64_t since,
                             uint64_t blocked0) {
  uint64_t blocked =
      S->blocked_cycles > blocked0 ? S->blocked_cycles - blocked0 : 0;
  return now >= since + blocked ? now - since - blocked : UINT64_MAX;
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
** read.  Totals stay exact.  What a short
** event cannot know at its end is its own CPU time, and it needs none: an
** event that short reaches no histogram bucket (the first is 1 ms), and as
** the limit is kept under the watcher's jank threshold it raises no jank
** alert.  Snapshots, the end of monitoring, quiet regions and probe
** changes close the window exactly. */
#define PM_WINDOW_US 250.0
#define PM_CUT_US 1000.0
#define PM_TOUCHED_MAX 64 /* groups a period outside events lists (change) */

static double window_limit_us (pm_State *S) {
  if (S->watching && S->jank_threshold > 0 && S->jank_threshold < PM_WINDOW_US)
    return S->jank_threshold;
  return PM_WINDOW_US;
}

/* Whether the window may stay open at now: the counter's rate is known,
** the window is younger than the limit, and it began on this OS thread (a
** CPU clock read on another thread measures that one). */
static int window_young (pm_State *S, uint64_t now) {
  return S->cycles_per_us > 0 && now >= S->window_cycles &&
         (double)(now - S->window_cycles) <
             window_limit_us(S) * S->cycles_per_us &&
         S->window_thread == pm_os_thread();
}

/* Lists g in the window and adds d cycles to its meter m (g->all or
** g->self). */
static void window_add (pm_State *S, pm_Group *g, pm_Meter *m, uint64_t d) {
  if (g->in_window != S->window) {
    g->in_window = S->window;
    g->next_windowed = S->windowed;
    S->windowed = g;
  }
  m->window_cycles += d;
  m->open_cycles += d;
}

/* The age in cycles at which a group change ends the window: never
** without cycles (no jank probe), at once until the counter's rate is
** known. */
static void window_set_limit (pm_State *S) {
  S->window_limit = HAS(S, PM_PROBE_JANK)
                        ? (uint64_t)(PM_CUT_US * S->cycles_per_us)
                        : UINT64_MAX;
}

/* Measures the counter's rate since monitoring began, for window_young;
** once a millisecond has passed, at each window's end. */
static void measure_rate (pm_State *S, uint64_t now) {
  double wall = pm_wall_us();
  if (wall - S->rate_wall >= 1000.0 && now > S->rate_cycles)
    S->cycles_per_us = (double)(now - S->rate_cycles) / (wall - S->rate_wall);
  window_set_limit(S);
}

/* The part (0..1) of the window's busy cycles that fell in the current
** period: all of them unless the window was left open at its last commit. */
static double window_in_period (pm_State *S, uint64_t now, uint64_t cycles) {
  uint64_t c;
  if (S->window_cycles >= S->period_cycles)
    return 1;
  c = busy_cycles(S, now, S->period_cycles, S->period_blocked);
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

/* Gives meter m its share of the window's CPU time dt (cycles busy cycles
** long), unless the group's share is discarded: the part of earlier
** periods to total, that of this one held. */
static void meter_close (pm_Meter *m, pm_CpuTime *total, const pm_CpuTime *dt,
                         uint64_t cycles, int keep) {
  if (keep) {
    credit(total, dt,
           (double)(m->window_cycles - m->open_cycles) / (double)cycles);
    credit(&m->period_time, dt, (double)m->open_cycles / (double)cycles);
  }
  m->window_cycles = 0;
  m->open_cycles = 0;
}

/* Ends the window at now: reads the thread's CPU time and gives each group
** its share of the window's cycles applied to it.  The share of cycles run
** in earlier periods goes to the totals; that of this period is held until
** its commit, so that a snapshot inside an event leaves the event out.  A
** share above 100% (counter reset, unsynchronised CPUs) is discarded.
** Without the jank probe no cycles are counted, so there is nothing to
** share, and no clock is read: a monitor of ticks alone would otherwise pay
** a system call at every event boundary. */
static void window_close (pm_State *S, uint64_t now) {
  pm_CpuTime now_time, dt;
  uint64_t cycles;
  double part;
  pm_Group *g = S->windowed, *next;
  if (!HAS(S, PM_PROBE_JANK))
    return;
  cycles = busy_cycles(S, now, S->window_cycles, S->window_blocked);
  pm_cputime(&now_time);
  pm_cputime_delta(&S->window_time, &now_time, &dt);
  if (cycles == UINT64_MAX)
    cycles = 0; /* the counter went backwards: discard the window */
  for (; g != NULL; g = next) {
    next = g->next_windowed;
    /* a share above 100% is the inclusive one's: its self time goes too */
    int keep = cycles > 0 && g->all.window_cycles <= cycles;
    self_cap(&g->self, &g->all);
    meter_close(&g->all, &g->total.cpu, &dt, cycles, keep);
    meter_close(&g->self, &g->total.self, &dt, cycles, keep);
  }
  part = cycles > 0 ? window_in_period(S, now, cycles) : 1;
  credit(&S->process.cpu, &dt, 1 - part);
  credit(&S->process.self, &dt, 1 - part); /* all it runs is its own */
  credit(&S->period_time, &dt, part);
  if (cycles > 0)
    S->cpu_per_cycle = dt.cpu_us / (double)cycles;
  measure_rate(S, now);
  S->windowed = NULL;
  S->window++;
  S->window_cycles = now;
  S->window_blocked = blocked_at(S, now);
  S->window_time = now_time;
  S->window_thread = pm_os_thread();
}

/* }====================================================== */

/*
** {======================================================
** Stopwatches
** =======================================================
*/

/* Adds what was allocated from since to now to acc. */
static void allocs_add (pm_Allocs *acc, const pm_Allocs *now,
                        const pm_Allocs *since) {
  acc->bytes += now->bytes - since->bytes;
  acc->count += now->count - since->count;
}

static void touch (pm_State *S, pm_Group *g) {
  if (g->touched_period != S->period) {
    g->touched_period = S->period;
    g->next_touched = S->touched;
    S->touched = g;
    S->ntouched++;
  }
}

static void start (pm_State *S, pm_Group *g, uint64_t now, uint32_t cpu) {
  g->owner_iter = S->iter;
  g->start_cycles = now;
  g->start_cpu = cpu;
  g->start_blocking = S->blocking_total;
  g->start_blocked = blocked_at(S, now);
  g->start_alloc = S->allocs;
  touch(S, g);
}

/* Adds the running measure of g up to now to its period and its window.
** A measure that went backwards or moved to another CPU is discarded; in a
** quiet region (listeners run) it joins no window. */
static void charge (pm_State *S, pm_Group *g, uint64_t now, uint32_t cpu) {
  uint64_t d = busy_cycles(S, now, g->start_cycles, g->start_blocked);
  if (d != UINT64_MAX && cpu == g->start_cpu) {
    g->recent_cycles += d;
    if (!S->quiet && HAS(S, PM_PROBE_JANK))
      window_add(S, g, &g->all, d);
  }
  g->recent_blocking += S->blocking_total - g->start_blocking;
  allocs_add(&g->recent_alloc, &S->allocs, &g->start_alloc);
}

/* Self time: the innermost frame's set (S->self_set) is measured from
** its last change.  Up to now it goes to those of its groups whose
** stopwatch runs: a group cancelled by a nested loop or an event boundary
** gets no self time either, so self time never exceeds inclusive time. */
static void self_charge (pm_State *S, uint64_t now, uint32_t cpu) {
  const pm_Set *s = S->self_set;
  uint64_t d = busy_cycles(S, now, S->self_cycles, S->self_blocked);
  int i;
  if (s != NULL && d != UINT64_MAX && cpu == S->self_cpu && !S->quiet &&
      HAS(S, PM_PROBE_JANK))
    for (i = 0; i < s->n; i++)
      if (s->g[i]->owner_iter == S->iter)
        window_add(S, s->g[i], &s->g[i]->self, d);
  if (s != NULL && S->count_allocs)
    for (i = 0; i < s->n; i++)
      if (s->g[i]->owner_iter == S->iter)
        allocs_add(&s->g[i]->recent_self_alloc, &S->allocs, &S->self_alloc);
  S->self_alloc = S->allocs;
  S->self_cycles = now;
  S->self_cpu = cpu;
  S->self_blocked = blocked_at(S, now);
}

/* Charges every running stopwatch up to now and restarts it there. */
static void split (pm_State *S, uint64_t now, uint32_t cpu) {
  pm_Group *g;
  for (g = S->touched; g != NULL; g = g->next_touched)
    if (g->owner_iter == S->iter) {
      charge(S, g, now, cpu);
      start(S, g, now, cpu);
    }
  self_charge(S, now, cpu);
}

/* A group change in a window past its limit ends the window there. */
static void window_cut (pm_State *S, uint64_t now, uint32_t cpu) {
  split(S, now, cpu);
  window_close(S, now);
}

static int window_due (pm_State *S, uint64_t now) {
  return now - S->window_cycles >= S->window_limit;
}

/* The stopwatches of s that are not running, as bits of s. */
static uint32_t stopped (pm_State *S, const pm_Set *s) {
  uint32_t bits = 0;
  int i;
  for (i = 0; i < s->n; i++)
    if (s->g[i]->owner_iter != S->iter)
      bits |= 1u << i;
  return bits;
}

static void acquire (pm_State *S, const pm_Set *s, uint32_t owned, uint64_t now,
                     uint32_t cpu) {
  int i;
  for (i = 0; i < s->n; i++)
    if (owned & (1u << i)) {
      start(S, s->g[i], now, cpu);
      s->g[i]->recent_ticks += HAS(S, PM_PROBE_TICKS);
    }
}

/* Stops the stopwatches a frame started in iteration iter, unless a nested
** loop or an event boundary cancelled them since. */
static void release (pm_State *S, const pm_Set *s, uint32_t owned,
                     uint64_t iter, uint64_t now, uint32_t cpu) {
  int i;
  if (iter != S->iter)
    return;
  for (i = 0; i < s->n; i++)
    if ((owned & (1u << i)) && s->g[i]->owner_iter == iter) {
      charge(S, s->g[i], now, cpu);
      s->g[i]->owner_iter = 0;
    }
}

enum { COMMIT_GAP, COMMIT_EVENT, COMMIT_EXACT }; /* commit's kinds */
static void commit (pm_State *S, int kind);

/* Reads the clock for a group change, ending the window when it is due.
** Outside events a period ends only at a snapshot, and a window's end
** walks every group the period touched (split): a host that runs many
** groups between snapshots would pay for all of them at each window.  So
** there the window's end commits the period once the list is long, as a
** snapshot would, and the list starts again from the groups running. */
static uint64_t change (pm_State *S, uint32_t *cpu) {
  uint64_t now = read_cycles(S, cpu);
  if (window_due(S, now)) {
    if (PM_UNLIKELY(S->ntouched > PM_TOUCHED_MAX && !S->in_event[S->loop])) {
      commit(S, COMMIT_EXACT);
      now = read_cycles(S, cpu);
    } else
      window_cut(S, now, *cpu);
  }
  return now;
}

uint32_t pm_sw_acquire (pm_State *S, const pm_Set *s) {
  uint32_t owned = stopped(S, s), cpu;
  uint64_t now;
  if (owned != 0) {
    now = change(S, &cpu);
    acquire(S, s, owned, now, cpu);
  }
  return owned;
}

void pm_sw_release (pm_State *S, const pm_Set *s, uint32_t owned,
                    uint64_t iter) {
  uint32_t cpu;
  uint64_t now;
  if (iter == S->iter) {
    now = change(S, &cpu);
    release(S, s, owned, iter, now, cpu);
  }
}

uint64_t pm_sw_enter (pm_State *S, const pm_Set *s) {
  uint32_t owned = stopped(S, s), cpu;
  uint64_t now = change(S, &cpu);
  self_charge(S, now, cpu);
  S->self_set = s;
  acquire(S, s, owned, now, cpu);
  return PM_SW_SELF | owned;
}

void pm_sw_leave (pm_State *S, const pm_Set *s, uint64_t owned, uint64_t iter,
                  const pm_Set *below) {
  uint32_t cpu;
  uint64_t now = change(S, &cpu);
  if (owned & PM_SW_SELF) {
    self_charge(S, now, cpu);
    S->self_set = below;
  }
  release(S, s, (uint32_t)owned, iter, now, cpu);
}

void pm_sw_self (pm_State *S, const pm_Set *s) {
  uint32_t cpu;
  uint64_t now = change(S, &cpu);
  self_charge(S, now, cpu);
  S->self_set = s;
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
static void commit_group (pm_State *S, pm_Group *g, double per_cycle,
                          int is_event) {
  double cpu_us, self_us;
  self_cap(&g->self, &g->all);
  cpu_us = period_us(&g->all, per_cycle);
  self_us = period_us(&g->self, per_cycle);
  credit(&g->total.cpu, &g->all.period_time, 1);
  credit(&g->total.self, &g->self.period_time, 1);
  g->all.period_time = g->self.period_time = none;
  if (!S->quiet) {
    g->total.blocking_us += g->recent_blocking;
    g->total.ticks += g->recent_ticks;
    allocs_add(&g->total.alloc, &g->recent_alloc, &none_alloc);
    allocs_add(&g->total.self_alloc, &g->recent_self_alloc, &none_alloc);
    if (is_event) {
      /* an event it ran in: a group only restarted at the boundary, or
      ** not measured (no jank probe), has no cycles in it */
      if (g->recent_cycles > 0)
        histogram(&g->total, cpu_us, self_us);
      if (S->watching)
        pm_alert_check(S, g, cpu_us, self_us, g->recent_blocking);
    }
  }
  g->recent_cycles = 0;
  g->recent_blocking = 0;
  g->recent_ticks = 0;
  g->recent_alloc = g->recent_self_alloc = none_alloc;
  /* the cycles stay in the window, for the totals */
  g->all.open_cycles = g->self.open_cycles = 0;
}

/* Ends the current period.  Stopwatches still running are split at this
** instant: the part so far is committed, the rest goes to the next period. */
static void commit (pm_State *S, int kind) {
  uint32_t cpu;
  uint64_t now = read_cycles(S, &cpu);
  uint64_t cycles = busy_cycles(S, now, S->period_cycles, S->period_blocked);
  uint64_t open;
  int is_event = kind == COMMIT_EVENT;
  double per_cycle;
  pm_Group *g, *next;
  for (g = S->touched; g != NULL; g = g->next_touched)
    if (g->owner_iter == S->iter)
      charge(S, g, now, cpu);
  self_charge(S, now, cpu);
  if (kind == COMMIT_EXACT || !window_young(S, now))
    window_close(S, now);
  per_cycle = S->cpu_per_cycle;
  if (per_cycle * S->cycles_per_us > 1)
    per_cycle = 1 / S->cycles_per_us;
  /* the period's busy cycles in the window still open (none if just closed) */
  open = S->window_cycles >= S->period_cycles
             ? busy_cycles(S, now, S->window_cycles, S->window_blocked)
             : cycles;
  if (open == UINT64_MAX)
    open = 0;
  if (is_event && HAS(S, PM_PROBE_JANK) && cycles != UINT64_MAX) {
    double cpu_us = S->period_time.cpu_us + (double)open * per_cycle;
    histogram(&S->process, cpu_us, cpu_us); /* all of it is the process's */
  }
  if (is_event && HAS(S, PM_PROBE_TICKS))
    S->process.ticks++; /* the process is entered once per event */
  /* all it allocates is its own, listeners and perfmon's tables included */
  allocs_add(&S->process.alloc, &S->allocs, &S->period_alloc);
  allocs_add(&S->process.self_alloc, &S->allocs, &S->period_alloc);
  S->period_alloc = S->allocs;
  g = S->touched;
  S->touched = NULL;
  S->ntouched = 0;
  S->period++;
  credit(&S->process.cpu, &S->period_time, 1);
  credit(&S->process.self, &S->period_time, 1);
  S->period_time = none;
  for (; g != NULL; g = next) { /* a running stopwatch joins the new list */
    next = g->next_touched;
    commit_group(S, g, per_cycle, is_event);
    if (g->owner_iter == S->iter)
      start(S, g, now, cpu);
  }
  S->period_cycles = now;
  S->period_blocked = blocked_at(S, now);
}

/* Marks now as the beginning of the period, the window and the measure of
** the counter's rate. */
static void restart (pm_State *S) {
  uint32_t cpu;
  S->period_cycles = S->window_cycles = S->rate_cycles = S->self_cycles =
      read_cycles(S, &cpu);
  S->self_cpu = cpu;
  S->period_blocked = S->window_blocked = S->self_blocked =
      blocked_at(S, S->period_cycles);
  S->self_alloc = S->period_alloc = S->allocs;
  pm_cputime(&S->window_time);
  S->window_thread = pm_os_thread();
  S->rate_wall = pm_wall_us();
  window_set_limit(S);
}

void pm_sw_start (pm_State *S) {
  S->period++;
  S->window++;
  S->iter++;
  S->touched = NULL;
  S->ntouched = 0;
  S->windowed = NULL;
  S->self_set = NULL;
  restart(S);
}

void pm_sw_stop (pm_State *S) {
  commit(S, COMMIT_EXACT);
  S->iter++;
  S->self_set = NULL; /* the sets go with the last monitor */
}

/* Quiet regions are cut at both ends so that the time inside is dropped,
** not shared with what ran before or after. */
void pm_sw_quiet (pm_State *S, int on) {
  if (S->monitors > 0)
    commit(S, COMMIT_EXACT);
  S->quiet = on;
}

void pm_sw_snapshot (pm_State *S) {
  if (S->monitors > 0 && !S->in_event[S->loop])
    commit(S, COMMIT_EXACT);
}

void pm_sw_own (pm_State *S, int on) {
  uint32_t cpu;
  pm_CpuTime now, d;
  uint64_t c;
  if (on) {
    /* inside a blocking call its cycles are left out already */
    if (!(S->own = S->monitors > 0 && S->blocking_depth == 0))
      return;
    S->own_cycles = read_cycles(S, &cpu);
    pm_cputime(&S->own_time);
    S->count_allocs = 0;
    return;
  }
  if (!S->own)
    return;
  S->own = 0;
  /* its cycles count as blocked, its CPU time moves the window's start */
  c = read_cycles(S, &cpu);
  pm_cputime(&now);
  if (c >= S->own_cycles)
    S->blocked_cycles += c - S->own_cycles;
  pm_cputime_delta(&S->own_time, &now, &d);
  S->window_time.cpu_us += d.cpu_us;
  S->window_time.user_us += d.user_us;
  S->window_time.system_us += d.system_us;
  S->count_allocs = HAS(S, PM_PROBE_MEMORY);
}

/* Changing probes changes what a measure means: commit what was measured
** so far and cancel the measures under way, so none mixes the two. */
void pm_sw_probes (pm_State *S, unsigned probes, int delta) {
  unsigned before = S->probes;
  int p;
  if (S->monitors > 0)
    commit(S, COMMIT_EXACT);
  for (p = 0; p < PM_NPROBES; p++)
    if (probes & PM_BIT(p)) {
      S->probe_refs[p] += delta;
      if (S->probe_refs[p] > 0)
        S->probes |= PM_BIT(p);
      else
        S->probes &= ~PM_BIT(p);
    }
  if (S->probes != before) {
    S->iter++;
    if (S->monitors > 0 && ((S->probes ^ before) & PM_BIT(PM_PROBE_JANK)))
      restart(S); /* cycles were not read without it */
    if ((S->probes ^ before) & PM_BIT(PM_PROBE_CHUNKS))
      pm_functions_forget(S);
    S->count_allocs = HAS(S, PM_PROBE_MEMORY);
  }
}

/* }====================================================== */

/*
** {======================================================
** Events, nested loops, blocking calls
** =======================================================
*/

static void mark (pm_State *S, int kind) {
  if (S->monitors > 0)
    commit(S, kind);
  S->iter++;
}

int pm_sw_event_begin (pm_State *S) {
  if (S->in_event[S->loop])
    return PERFMON_EMISUSE;
  mark(S, COMMIT_GAP);
  S->in_event[S->loop] = 1;
  pm_alert_event_begin(S);
  return PERFMON_OK;
}

int pm_sw_event_end (pm_State *S) {
  if (!S->in_event[S->loop])
    return PERFMON_EMISUSE;
  mark(S, COMMIT_EVENT);
  S->in_event[S->loop] = 0;
  return PERFMON_OK;
}

int pm_sw_nested_enter (pm_State *S) {
  if (S->loop + 1 == PM_MAX_LOOPS)
    return PERFMON_EMISUSE;
  mark(S, S->in_event[S->loop] ? COMMIT_EVENT : COMMIT_GAP);
  S->in_event[++S->loop] = 0;
  return PERFMON_OK;
}

/* An event left open inside the nested loop ends with it. */
int pm_sw_nested_leave (pm_State *S) {
  if (S->loop == 0) {
    if (S->loop_orphans == 0)
      return PERFMON_EMISUSE;
    S->loop_orphans--;
    return PERFMON_OK;
  }
  mark(S, S->in_event[S->loop] ? COMMIT_EVENT : COMMIT_GAP);
  S->in_event[S->loop--] = 0;
  return PERFMON_OK;
}

/* A switch of loop level ends the stretch of the level left, as entering
** and leaving a nested loop do: an event open there counts what ran up to
** now, and it goes on when the level comes back. */
uint64_t pm_sw_nested_pause (pm_State *S, int n) {
  uint64_t events = 0;
  int i;
  if (n <= 0 || n > S->loop)
    return 0;
  mark(S, S->in_event[S->loop] ? COMMIT_EVENT : COMMIT_GAP);
  for (i = 0; i < n; i++, S->loop--) {
    events |= (uint64_t)S->in_event[S->loop] << i;
    S->in_event[S->loop] = 0;
  }
  return events;
}

int pm_sw_nested_resume (pm_State *S, int n, uint64_t events) {
  int i;
  if (n <= 0)
    return 1;
  if (S->loop + n >= PM_MAX_LOOPS)
    return 0;
  mark(S, S->in_event[S->loop] ? COMMIT_EVENT : COMMIT_GAP);
  for (i = n - 1; i >= 0; i--)
    S->in_event[++S->loop] = (unsigned char)((events >> i) & 1);
  return 1;
}

void pm_sw_nested_orphan (pm_State *S, int n) {
  if (n > 0)
    S->loop_orphans += n;
}

/* The thread starts waiting: from now its cycles are blocked. */
static void blocking_open (pm_State *S) {
  uint32_t cpu;
  S->blocking_since = pm_wall_us();
  S->blocking_since_cycles = read_cycles(S, &cpu);
}

/* The wait is over: its cycles join the blocked ones, its wall time the
** blocking time. */
static void blocking_close (pm_State *S) {
  uint32_t cpu;
  if (S->monitors == 0)
    return;
  S->blocked_cycles = blocked_at(S, read_cycles(S, &cpu));
  if (HAS(S, PM_PROBE_BLOCKING)) {
    double d = pm_wall_us() - S->blocking_since;
    S->blocking_total += d;
    S->process.blocking_us += d;
  }
}

int pm_sw_blocking_begin (pm_State *S) {
  if (S->blocking_depth++ == 0)
    blocking_open(S);
  return PERFMON_OK;
}

int pm_sw_blocking_end (pm_State *S) {
  if (S->blocking_depth == 0) {
    if (S->blocking_orphans == 0)
      return PERFMON_EMISUSE;
    S->blocking_orphans--;
    return PERFMON_OK;
  }
  if (S->blocking_depth == 1)
    blocking_close(S);
  S->blocking_depth--;
  return PERFMON_OK;
}

void pm_sw_blocking_pause (pm_State *S, int n) {
  if (n <= 0 || n > S->blocking_depth)
    return;
  if (n == S->blocking_depth)
    blocking_close(S);
  S->blocking_depth -= n;
}

void pm_sw_blocking_orphan (pm_State *S, int n) {
  if (n > 0)
    S->blocking_orphans += n;
}

void pm_sw_blocking_resume (pm_State *S, int n) {
  if (n <= 0)
    return;
  if (S->blocking_depth == 0)
    blocking_open(S);
  S->blocking_depth += n;
}

/* }====================================================== */
