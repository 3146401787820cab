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
** Periods and commits
** =======================================================
*/

static void histogram (pm_Stats *st, double cpu_us) {
  double ms = cpu_us / 1000.0, bound = 1.0;
  int k;
  for (k = 0; k < PM_DURATIONS && ms >= bound; k++, bound *= 2)
    st->durations[k]++;
}

/* Moves one group's recent counters into its totals.  Its CPU time is its
** share of the period's cycles applied to the period's measured CPU time;
** a share above 100% (counter reset, unsynchronised CPUs) is discarded.
** In a quiet region (listeners run) the counters are dropped instead. */
static void commit_group (pm_State *S, pm_Group *g, uint64_t cycles,
                          const pm_CpuTime *dt, int is_event) {
  double cpu = 0;
  if (HAS(S, PM_PROBE_JANK) && cycles > 0 && g->recent_cycles <= cycles &&
      !S->quiet) {
    double share = (double)g->recent_cycles / (double)cycles;
    double user = share * dt->user_us, sys = share * dt->system_us;
    cpu = user + sys;
    g->total.user_us += user;
    g->total.system_us += sys;
    g->total.cpu_us += cpu;
    if (is_event)
      histogram(&g->total, cpu);
  }
  if (!S->quiet) {
    g->total.blocking_us += g->recent_blocking;
    g->total.ticks += g->recent_ticks;
    if (is_event && S->watching)
      pm_alert_check(S, g, cpu, g->recent_blocking);
  }
  g->recent_cycles = 0;
  g->recent_blocking = 0;
  g->recent_ticks = 0;
}

/* Ends the current period.  Stopwatches still running are split at this
** instant: the part so far is committed, the rest goes to the next period. */
static void commit (pm_State *S, int is_event) {
  pm_CpuTime now_time, dt;
  uint32_t cpu;
  uint64_t now = read_cycles(S, &cpu), cycles;
  pm_Group *g = S->touched, *next;
  pm_cputime(&now_time);
  pm_cputime_delta(&S->period_time, &now_time, &dt);
  cycles = busy_cycles(S, now, S->period_cycles, S->period_blocked);
  if (cycles == UINT64_MAX)
    cycles = 0; /* the counter went backwards: discard the period */
  S->touched = NULL;
  S->period++;
  for (; g != NULL; g = next) {
    next = g->next_touched;
    if (g->owner_iter == S->iter) {
      charge(S, g, now, cpu);
      start(S, g, now, cpu);
    }
    commit_group(S, g, cycles, &dt, is_event);
  }
  if (HAS(S, PM_PROBE_JANK)) {
    S->process.user_us += dt.user_us;
    S->process.system_us += dt.system_us;
    S->process.cpu_us += dt.cpu_us;
    if (is_event)
      histogram(&S->process, dt.cpu_us);
  }
  if (is_event && HAS(S, PM_PROBE_TICKS))
    S->process.ticks++; /* the process is entered once per event */
  S->period_cycles = now;
  S->period_blocked = S->blocked_cycles;
  S->period_time = now_time;
  S->period_wall = pm_wall_us();
}

void pm_sw_start (pm_State *S) {
  uint32_t cpu;
  S->period++;
  S->iter++;
  S->touched = NULL;
  S->period_cycles = read_cycles(S, &cpu);
  S->period_blocked = S->blocked_cycles;
  pm_cputime(&S->period_time);
  S->period_wall = pm_wall_us();
}

void pm_sw_stop (pm_State *S) {
  commit(S, 0);
  S->iter++;
}

/* Quiet regions are cut at both ends so that the time inside is dropped,
** not shared with what ran before or after. */
void pm_sw_quiet (pm_State *S, int on) {
  if (S->monitors > 0)
    commit(S, 0);
  S->quiet = on;
}

void pm_sw_snapshot (pm_State *S) {
  if (S->monitors > 0 && !S->in_event[S->loop])
    commit(S, 0);
}

/* Changing probes changes what a measure means: commit what was measured
** so far and cancel the measures under way, so none mixes the two. */
void pm_sw_probes (pm_State *S, unsigned probes, int delta) {
  unsigned before = S->probes;
  int p;
  if (S->monitors > 0)
    commit(S, 0);
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

static void mark (pm_State *S, int is_event) {
  if (S->monitors > 0)
    commit(S, is_event);
  S->iter++;
}

/* An event that begins less than PM_GAP_US after the last commit (an
** event loop going from one event straight to the next) does not commit the
** gap apart: the gap joins the event's period, which then has one CPU
** clock read instead of two.  Its cycles and its CPU time both join, so the
** shares stay exact as long as the thread ran during the gap; a wait off
** the CPU shorter than PM_GAP_US is the most that can be counted as
** running.  The gap's process time is still counted, in the event. */
#define PM_GAP_US 10.0

int pm_sw_event_begin (pm_State *S) {
  if (S->in_event[S->loop])
    return PERFMON_EMISUSE;
  if (S->monitors > 0 && pm_wall_us() - S->period_wall < PM_GAP_US)
    S->iter++;
  else
    mark(S, 0);
  S->in_event[S->loop] = 1;
  pm_alert_event_begin(S);
  return PERFMON_OK;
}

int pm_sw_event_end (pm_State *S) {
  if (!S->in_event[S->loop])
    return PERFMON_EMISUSE;
  mark(S, 1);
  S->in_event[S->loop] = 0;
  return PERFMON_OK;
}

int pm_sw_nested_enter (pm_State *S) {
  if (S->loop + 1 == PM_MAX_LOOPS)
    return PERFMON_EMISUSE;
  mark(S, S->in_event[S->loop]);
  S->in_event[++S->loop] = 0;
  return PERFMON_OK;
}

/* An event left open inside the nested loop ends with it. */
int pm_sw_nested_leave (pm_State *S) {
  if (S->loop == 0)
    return PERFMON_EMISUSE;
  mark(S, S->in_event[S->loop]);
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
