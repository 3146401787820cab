/*
** stopwatch.c -- iterations, stopwatches, periods and commits.
*/
#include "stopwatch.h"

#include "alert.h"
#include "perfmon.h"

#define HAS(S, p) (((S)->probes & PM_BIT(p)) != 0)

/*
** {======================================================
** Stopwatches
** =======================================================
*/

static void touch (pm_State *S, pm_Group *g) {
  if (g->touched_period != S->period) {
    g->touched_period = S->period;
    g->next_touched = S->touched;
    S->touched = g;
  }
}

static void start (pm_State *S, pm_Group *g, uint64_t now, uint32_t cpu) {
  g->owner_iter = S->iter;
  g->start_cycles = now;
  g->start_cpu = cpu;
  g->start_blocking = S->blocking_total;
  g->start_blocked = S->blocked_cycles;
  touch(S, g);
}

/* Cycles from since to now less those spent blocked since blocked0 (off the
** CPU: counting them would inflate the share of whoever was waiting), or
** UINT64_MAX when the counter went backwards. */
static uint64_t busy_cycles (pm_State *S, uint64_t now, uint64_t since,
                             uint64_t blocked0) {
  uint64_t blocked = S->blocked_cycles - blocked0;
  return now >= since + blocked ? now - since - blocked : UINT64_MAX;
}

/* Adds the running measure of g up to now to its recent counters.  A
** measure that went backwards or moved to another CPU is discarded. */
static void charge (pm_State *S, pm_Group *g, uint64_t now, uint32_t cpu) {
  uint64_t d = busy_cycles(S, now, g->start_cycles, g->start_blocked);
  if (d != UINT64_MAX && cpu == g->start_cpu)
    g->recent_cycles += d;
  g->recent_blocking += S->blocking_total - g->start_blocking;
}

static uint64_t read_cycles (pm_State *S, uint32_t *cpu) {
  *cpu = PM_CPU_UNKNOWN;
  return HAS(S, PM_PROBE_JANK) ? pm_cycles(cpu) : 0;
}

uint32_t pm_sw_acquire (pm_State *S, const pm_Set *s) {
  uint32_t owned = 0, cpu;
  uint64_t now;
  int i;
  for (i = 0; i < s->n; i++)
    if (s->g[i]->owner_iter != S->iter)
      owned |= 1u << i;
  if (owned == 0)
    return 0;
  now = read_cycles(S, &cpu);
  for (i = 0; i < s->n; i++)
    if (owned & (1u << i)) {
      start(S, s->g[i], now, cpu);
      s->g[i]->recent_ticks += HAS(S, PM_PROBE_TICKS);
    }
  return owned;
}

void pm_sw_release (pm_State *S, const pm_Set *s, uint32_t owned,
                    uint64_t iter) {
  uint32_t cpu;
  uint64_t now;
  int i;
  if (iter != S->iter)
    return; /* cancelled: a nested loop or an event boundary came between */
  now = read_cycles(S, &cpu);
  for (i = 0; i < s->n; i++)
    if ((owned & (1u << i)) && s->g[i]->owner_iter == iter) {
      charge(S, s->g[i], now, cpu);
      s->g[i]->owner_iter = 0;
    }
}

/* }====================================================== */

/*
** {======================================================
** Periods, windows and commits
** =======================================================
*/

enum { COMMIT_GAP, COMMIT_EVENT, COMMIT_EXACT };

/* A period is the span between two commits (event boundaries): what each
** group did in an event is committed at its end.  A window is the span
** between two reads of the thread's CPU clock, which turn the cycles of
** the groups that ran in it into CPU time.  That read is a system call of
** about a microsecond, as long as a short event itself, so at an event
** boundary the window stays open while it is younger than PM_WINDOW_US:
** the events in it keep their cycles, and the next read gives each group
** its share of the whole window.  Totals stay exact.  What a short event
** cannot know at its end is its own CPU time, and it needs none: an event
** that short reaches no histogram bucket (the first is 1 ms), and as the
** limit is kept under the watcher's jank threshold it raises no jank
** alert.  Snapshots, the end of monitoring, quiet regions and probe
** changes close the window (COMMIT_EXACT). */
#define PM_WINDOW_US 250.0

static void histogram (pm_Stats *st, double cpu_us) {
  double ms = cpu_us / 1000.0, bound = 1.0;
  int k;
  for (k = 0; k < PM_DURATIONS && ms >= bound; k++, bound *= 2)
    st->durations[k]++;
}

/* Whether the window may stay open at now: the counter's rate is known,
** the window is younger than the limit, and it began on this OS thread (a
** CPU clock read on another thread measures that one). */
static int window_young (pm_State *S, uint64_t now) {
  double limit = PM_WINDOW_US;
  if (S->watching && S->jank_threshold > 0 && S->jank_threshold < limit)
    limit = S->jank_threshold;
  return S->cycles_per_us > 0 && now >= S->window_cycles &&
         (double)(now - S->window_cycles) < limit * S->cycles_per_us &&
         S->window_thread == pm_os_thread();
}

/* Lists g in the window with the cycles it ran in the period. */
static void window_add (pm_State *S, pm_Group *g) {
  if (g->in_window != S->window) {
    g->in_window = S->window;
    g->next_windowed = S->windowed;
    S->windowed = g;
  }
  g->window_cycles += g->recent_cycles;
}

/* Measures the counter's rate since monitoring began, for window_young;
** once a millisecond has passed, at each window's end. */
static void measure_rate (pm_State *S, uint64_t now) {
  double wall = pm_wall_us();
  if (wall - S->rate_wall >= 1000.0 && now > S->rate_cycles)
    S->cycles_per_us = (double)(now - S->rate_cycles) / (wall - S->rate_wall);
}

/* Ends the window at now: reads the thread's CPU time and gives each group
** its share of the window's cycles applied to it.  A share above 100%
** (counter reset, unsynchronised CPUs) is discarded. */
static void window_close (pm_State *S, uint64_t now) {
  pm_CpuTime now_time, dt;
  uint64_t cycles = busy_cycles(S, now, S->window_cycles, S->window_blocked);
  pm_Group *g = S->windowed, *next;
  pm_cputime(&now_time);
  pm_cputime_delta(&S->window_time, &now_time, &dt);
  if (cycles == UINT64_MAX)
    cycles = 0; /* the counter went backwards: discard the window */
  for (; g != NULL; g = next) {
    next = g->next_windowed;
    if (cycles > 0 && g->window_cycles <= cycles) {
      double share = (double)g->window_cycles / (double)cycles;
      g->total.user_us += share * dt.user_us;
      g->total.system_us += share * dt.system_us;
      g->total.cpu_us += share * dt.cpu_us;
    }
    g->window_cycles = 0;
  }
  if (HAS(S, PM_PROBE_JANK)) {
    S->process.user_us += dt.user_us;
    S->process.system_us += dt.system_us;
    S->process.cpu_us += dt.cpu_us;
    if (cycles > 0)
      S->cpu_per_cycle = dt.cpu_us / (double)cycles;
    measure_rate(S, now);
  }
  S->windowed = NULL;
  S->window++;
  S->window_cycles = now;
  S->window_blocked = S->blocked_cycles;
  S->window_time = now_time;
  S->window_thread = pm_os_thread();
}

/* What a group did in the period ending: ticks, blocking time, and for an
** event its histogram entry and the watcher's check.  cpu_us: its CPU
** time in the period.  In a quiet region (listeners run) it is dropped. */
static void commit_group (pm_State *S, pm_Group *g, double cpu_us,
                          int is_event) {
  if (!S->quiet) {
    g->total.blocking_us += g->recent_blocking;
    g->total.ticks += g->recent_ticks;
    if (is_event) {
      histogram(&g->total, cpu_us);
      if (S->watching)
        pm_alert_check(S, g, cpu_us, g->recent_blocking);
    }
  }
  g->recent_cycles = 0;
  g->recent_blocking = 0;
  g->recent_ticks = 0;
}

/* Ends the current period.  Stopwatches still running are split at this
** instant: the part so far is committed, the rest goes to the next period.
** The CPU time of a period in a window left open is estimated with the
** last window's rate, capped at its wall time: it is short, so this only
** ever decides that it is short. */
static void commit (pm_State *S, int kind) {
  uint32_t cpu;
  uint64_t now = read_cycles(S, &cpu);
  uint64_t cycles = busy_cycles(S, now, S->period_cycles, S->period_blocked);
  int exact = kind == COMMIT_EXACT || !window_young(S, now);
  int is_event = kind == COMMIT_EVENT;
  double per_cycle;
  pm_Group *g, *next;
  for (g = S->touched; g != NULL; g = g->next_touched) {
    if (g->owner_iter == S->iter)
      charge(S, g, now, cpu);
    if (!S->quiet && HAS(S, PM_PROBE_JANK))
      window_add(S, g);
  }
  if (exact)
    window_close(S, now);
  per_cycle = S->cpu_per_cycle;
  if (!exact && per_cycle * S->cycles_per_us > 1)
    per_cycle = 1 / S->cycles_per_us;
  if (is_event && HAS(S, PM_PROBE_JANK) && cycles != UINT64_MAX)
    histogram(&S->process, (double)cycles * per_cycle);
  if (is_event && HAS(S, PM_PROBE_TICKS))
    S->process.ticks++; /* the process is entered once per event */
  g = S->touched;
  S->touched = NULL;
  S->period++;
  for (; g != NULL; g = next) { /* a running stopwatch joins the new list */
    next = g->next_touched;
    commit_group(S, g, (double)g->recent_cycles * per_cycle, is_event);
    if (g->owner_iter == S->iter)
      start(S, g, now, cpu);
  }
  S->period_cycles = now;
  S->period_blocked = S->blocked_cycles;
}

/* Marks now as the beginning of the period, the window and the measure of
** the counter's rate. */
static void restart (pm_State *S) {
  uint32_t cpu;
  S->period_cycles = S->window_cycles = S->rate_cycles = read_cycles(S, &cpu);
  S->period_blocked = S->window_blocked = S->blocked_cycles;
  pm_cputime(&S->window_time);
  S->window_thread = pm_os_thread();
  S->rate_wall = pm_wall_us();
}

void pm_sw_start (pm_State *S) {
  S->period++;
  S->window++;
  S->iter++;
  S->touched = NULL;
  S->windowed = NULL;
  restart(S);
}

void pm_sw_stop (pm_State *S) {
  commit(S, COMMIT_EXACT);
  S->iter++;
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
  if (S->loop == 0)
    return PERFMON_EMISUSE;
  mark(S, S->in_event[S->loop] ? COMMIT_EVENT : COMMIT_GAP);
  S->in_event[S->loop--] = 0;
  return PERFMON_OK;
}

int pm_sw_blocking_begin (pm_State *S) {
  uint32_t cpu;
  if (S->blocking_depth++ == 0) {
    S->blocking_since = pm_wall_us();
    S->blocking_since_cycles = read_cycles(S, &cpu);
  }
  return PERFMON_OK;
}

int pm_sw_blocking_end (pm_State *S) {
  if (S->blocking_depth == 0)
    return PERFMON_EMISUSE;
  if (--S->blocking_depth == 0 && S->monitors > 0) {
    uint32_t cpu;
    uint64_t now = read_cycles(S, &cpu);
    if (S->blocking_since_cycles != 0 && now >= S->blocking_since_cycles)
      S->blocked_cycles += now - S->blocking_since_cycles;
    if (HAS(S, PM_PROBE_BLOCKING)) {
      double d = pm_wall_us() - S->blocking_since;
      S->blocking_total += d;
      S->process.blocking_us += d;
    }
  }
  return PERFMON_OK;
}

/* }====================================================== */
