/*
** host.c -- perfmon-host, a C host that checks perfmon against its clocks.
**
** A host program that drives Lua from C: it loads two plugins, each into
** its own sandbox and its own performance group, runs an event loop in C,
** and asks perfmon which plugin made it slow.  It then checks perfmon's
** answer against what it measured itself (ctest -R capi.host).
** examples/embed.c is the short version, without the checks.
**
**   perfmon-host [ROOT [sampled]]
**                            ROOT: the repository (default: .); sampled:
**                            the monitor is a sampled one (check_sampled)
**
** The plugins, in ROOT/tests/host/plugins/:
**   indexer.lua  burns ~5 ms of CPU every event and fails every 10th event
**                (the host catches the error with lua_pcall);
**   notes.lua    costs microseconds, but once calls host.save(), a blocking
**                call of ~20 ms, and once host.confirm(), a "modal dialog"
**                that spins a nested event loop in which the indexer runs.
**
** What the host measures itself (the ground truth), with clock_gettime:
**   - the thread CPU time of every plugin call (CLOCK_THREAD_CPUTIME_ID),
**     less the CPU time of nested loops run inside it: perfmon charges
**     neither the code that spun a nested loop nor the rest of that frame;
**   - per event and plugin, the same CPU time, turned into the durations
**     histogram the way perfmon defines it;
**   - the calls of each plugin (perfmon's ticks: one entry into the group
**     per call from the host);
**   - the wall time of the blocking call (CLOCK_MONOTONIC);
**   - the thread CPU time of the whole loop (perfmon's process cpu_us);
**   - the wall time of every event and plugin call.  perfmon splits an
**     event's CPU time between groups by their shares of the event's
**     cycles, which tick in wall time (declared blocking calls aside), so
**     when another process takes the CPU in the middle of an event the split
**     drifts from CPU time.  That is the design, not an error: the checks
**     of the cheap plugin's cpu_us and of the histograms widen by exactly
**     what such waits can explain (see event_end), and stay exact on an
**     idle machine.
**
** Exits 0 and prints "perfmon-host: ok" only when every perfmon_* call
** returned what it should and perfmon's numbers agree with the truth.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "perfmon.h"
#include "snapshot.h"

/* The run: outer events, the events of the one nested loop, the blocking
** call.  The notes plugin reads SAVE_AT and CONFIRM_AT from its sandbox. */
#define EVENTS 40
#define SAVE_AT 7
#define CONFIRM_AT 13
#define NESTED_EVENTS 3
#define NESTED_FIRST 1001 /* the nested loop's events are numbered from it */
#define BLOCK_MS 20

/* The checks' tolerances. */
#define CPU_TOLERANCE 0.25 /* the indexer's cpu_us against the truth */
#define SMALL_CPU_SLACK_US 1000 /* the notes' cpu_us: truth + 50% + this */
#define FAR_BELOW 10 /* the notes cost < indexer / FAR_BELOW */
#define BLOCKING_SLACK_US 1000 /* blocking_us against the measured sleep */
#define PROCESS_SLACK 0.02 /* process cpu_us: 2% + 1 ms */
#define BOUNDARY_MARGIN 0.10 /* truth this close to 2^k ms: too close */
#define DISTURBED_US 300 /* reported: events that waited this long */
#define SAMPLE_SPAN_US 12000 /* sampled: three samples' worth at HZ=250 */
#define SAMPLED_SUM_SLACK_US 500 /* sampled: the groups' sum over the process */

typedef SnapStats Stats;

typedef struct Plugin {
  const char *name; /* its group, and tests/host/plugins/<name>.lua */
  int id; /* its group's id */
  int handler_ref; /* its on_event, in the registry */
  /* ground truth */
  long calls, errors;
  double cpu_us;
  double waited_us; /* undeclared waits for the CPU inside its calls */
  long durations[NDURATIONS];
  long uncertain[NDURATIONS]; /* events too close to call, per bucket */
  Stats pm; /* what perfmon says */
} Plugin;

enum { INDEXER, NOTES, NPLUGINS };

/* What the host measures over one event (outer or nested).  For an outer
** event, the nested loop run inside it is not part of it. */
typedef struct Event {
  double wall0, cpu0, nested_wall0, nested_cpu0, blocked0;
  double cpu_us[NPLUGINS]; /* each plugin's CPU time in it */
  double waited_us[NPLUGINS]; /* and its undeclared waits for the CPU */
} Event;

static struct {
  const char *root;
  int sampled; /* the monitor is a sampled one (argument "sampled") */
  Plugin plugins[NPLUGINS];
  int perfmon_ref, monitor_ref, before_ref;
  int failures;
  Event *event; /* the event under way */
  long events; /* events run, outer and nested */
  long disturbed; /* events that waited for the CPU (undeclared) */
  double longest_wait_us;
  long nested_loops;
  long saves;
  double nested_cpu_us; /* thread CPU time spent in nested loops */
  double nested_wall_us;
  double blocked_us; /* wall time of the blocking calls */
  double loop_cpu_us; /* thread CPU time between the two snapshots */
  Stats process;
} H = {.plugins = {{.name = "indexer"}, {.name = "notes"}}};

/*
** {======================================================
** Clocks, failures, return codes
** =======================================================
*/

static double clock_us (clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double thread_cpu_us (void) {
  return clock_us(CLOCK_THREAD_CPUTIME_ID);
}

static void fail (const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "perfmon-host: FAIL: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  H.failures++;
}

static void die (const char *what, const char *msg) {
  fflush(stdout);
  fprintf(stderr, "perfmon-host: %s: %s\n", what, msg);
  exit(EXIT_FAILURE);
}

static const char *code_name (int rc) {
  switch (rc) {
    case PERFMON_OK: return "PERFMON_OK";
    case PERFMON_ENOTLOADED: return "PERFMON_ENOTLOADED";
    case PERFMON_EMISUSE: return "PERFMON_EMISUSE";
    case PERFMON_EOTHERCOPY: return "PERFMON_EOTHERCOPY";
    default: return "an unknown code";
  }
}

/* Checks the return code of a perfmon_* call; true when it is `want`. */
static int expect (int rc, int want, const char *call) {
  if (rc == want)
    return 1;
  fail("%s returned %d (%s: %s), expected %s", call, rc, code_name(rc),
       perfmon_strerror(rc), code_name(want));
  return 0;
}

#define PM_OK(call) expect((call), PERFMON_OK, #call)

/* }====================================================== */

/*
** {======================================================
** Events and plugin calls
** =======================================================
*/

static double wall_us (void) {
  return clock_us(CLOCK_MONOTONIC);
}

/* Adds an event in which p ran cpu_us to its histogram.  perfmon may see
** anything from lo_us to hi_us instead (see event_end): a bucket whose edge
** lies in that range, give or take BOUNDARY_MARGIN, is too close to call. */
static void histogram (Plugin *p, double cpu_us, double lo_us, double hi_us) {
  double bound = 1000.0;
  int k;
  for (k = 0; k < NDURATIONS; k++, bound *= 2) {
    if (cpu_us >= bound)
      p->durations[k]++;
    if (hi_us >= bound * (1 - BOUNDARY_MARGIN) &&
        lo_us < bound * (1 + BOUNDARY_MARGIN))
      p->uncertain[k]++;
  }
}

/* The host's measure of an event spans perfmon's (its clocks are read
** outside perfmon_event_begin/end), so that no wait perfmon sees is
** missed. */
static void event_begin (lua_State *L, Event *e) {
  memset(e, 0, sizeof(*e));
  e->nested_wall0 = H.nested_wall_us;
  e->nested_cpu0 = H.nested_cpu_us;
  e->blocked0 = H.blocked_us;
  e->wall0 = wall_us();
  e->cpu0 = thread_cpu_us();
  PM_OK(perfmon_event_begin(L));
  H.event = e;
}

/* Ends the event.  perfmon splits an event's CPU time C between the
** groups by their shares of its cycles, and cycles tick in wall time.  When
** the thread waited for the CPU (another process ran; nothing declared it)
** for w in all, w_i of it inside plugin i's calls, perfmon sees plugin i
** (CPU time c_i) run between c_i * C / (C + w) (every wait elsewhere in
** the event) and (c_i + w_i) * C / (C + w_i) (its own waits only).  That
** is the design (Firefox's too), not an error: the histogram check allows
** for it bucket by bucket, and the cpu_us checks by their tolerances. */
static void event_end (lua_State *L, Event *e) {
  double cpu, wall, waited;
  int i;
  PM_OK(perfmon_event_end(L));
  cpu = thread_cpu_us() - e->cpu0 - (H.nested_cpu_us - e->nested_cpu0);
  wall = wall_us() - e->wall0 - (H.nested_wall_us - e->nested_wall0) -
         (H.blocked_us - e->blocked0);
  waited = wall > cpu ? wall - cpu : 0;
  H.events++;
  H.disturbed += waited > DISTURBED_US;
  if (waited > H.longest_wait_us)
    H.longest_wait_us = waited;
  for (i = 0; i < NPLUGINS; i++) {
    double c = e->cpu_us[i], w = e->waited_us[i];
    if (c <= 0)
      continue; /* the plugin did not run in this event */
    if (cpu > 0)
      histogram(&H.plugins[i], c, c * cpu / (cpu + waited),
                (c + w) * cpu / (cpu + w));
    else
      histogram(&H.plugins[i], c, c, c);
  }
  H.event = NULL;
}

/* Calls plugin i's on_event(n) in protected mode and measures its CPU
** time, and how long it waited for the CPU. */
static void call_plugin (lua_State *L, int i, lua_Integer n) {
  Plugin *p = &H.plugins[i];
  double nested_cpu0 = H.nested_cpu_us, nested_wall0 = H.nested_wall_us;
  double blocked0 = H.blocked_us, t0, w0, spent, wall;
  int rc;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->handler_ref);
  lua_pushinteger(L, n);
  w0 = wall_us();
  t0 = thread_cpu_us();
  rc = lua_pcall(L, 1, 0, 0);
  spent = thread_cpu_us() - t0 - (H.nested_cpu_us - nested_cpu0);
  wall = wall_us() - w0 - (H.nested_wall_us - nested_wall0) -
         (H.blocked_us - blocked0);
  p->calls++;
  p->cpu_us += spent;
  p->waited_us += wall > spent ? wall - spent : 0;
  H.event->cpu_us[i] += spent;
  H.event->waited_us[i] += wall > spent ? wall - spent : 0;
  if (rc != LUA_OK) {
    p->errors++;
    printf("  event %4lld: %s raised an error, caught by the host: %s\n",
           (long long)n, p->name, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* }====================================================== */

/*
** {======================================================
** What the host offers the plugins (their sandbox's `host` table)
** =======================================================
*/

/* host.save(...): a blocking call (a synchronous write, here a sleep),
** declared to perfmon so that its wall time is charged as blocking_us to
** the groups running around it. */
static int host_save (lua_State *L) {
  struct timespec req = {0, BLOCK_MS * 1000000L}, rem;
  double w0, w1;
  if (!PM_OK(perfmon_blocking_begin(L)))
    return luaL_error(L, "host.save: perfmon_blocking_begin failed");
  w0 = wall_us();
  while (nanosleep(&req, &rem) != 0 && errno == EINTR)
    req = rem;
  w1 = wall_us();
  if (!PM_OK(perfmon_blocking_end(L)))
    return luaL_error(L, "host.save: perfmon_blocking_end failed");
  H.blocked_us += w1 - w0;
  H.saves++;
  printf("  host.save: blocked %.1f ms (perfmon_blocking_begin/end)\n",
         (w1 - w0) / 1000);
  return 0;
}

/* host.confirm(question): a modal dialog.  Like a browser's alert(), it
** spins a nested event loop until the user answers; the other plugin keeps
** getting its events meanwhile. */
static int host_confirm (lua_State *L) {
  const char *question = luaL_checkstring(L, 1);
  double c0, w0;
  Event *outer = H.event, inner;
  int k;
  printf("  host.confirm(\"%s\"): a nested loop of %d events "
         "(perfmon_nested_enter/leave)\n",
         question, NESTED_EVENTS);
  if (!PM_OK(perfmon_nested_enter(L)))
    return luaL_error(L, "host.confirm: perfmon_nested_enter failed");
  /* the nested loop, as the host measures it: inside perfmon's markers,
     which end the outer event's first half and begin its second */
  c0 = thread_cpu_us();
  w0 = wall_us();
  for (k = 0; k < NESTED_EVENTS; k++) {
    event_begin(L, &inner);
    call_plugin(L, INDEXER, NESTED_FIRST + k);
    event_end(L, &inner);
  }
  H.nested_cpu_us += thread_cpu_us() - c0;
  H.nested_wall_us += wall_us() - w0;
  H.event = outer;
  if (!PM_OK(perfmon_nested_leave(L)))
    return luaL_error(L, "host.confirm: perfmon_nested_leave failed");
  H.nested_loops++;
  lua_pushboolean(L, 1); /* the user said yes */
  return 1;
}

static const luaL_Reg host_funcs[] = {
    {"save", host_save}, {"confirm", host_confirm}, {NULL, NULL}};

/* }====================================================== */

/*
** {======================================================
** Setup: perfmon, groups, sandboxes, plugins, the monitor
** =======================================================
*/

/* Pushes a fresh sandbox: a small whitelist of globals and `host`. */
static void push_sandbox (lua_State *L) {
  static const char *const globals[] = {"error",    "ipairs", "pairs",  "print",
                                        "tostring", "type",   "string", "math",
                                        "table",    NULL};
  int i;
  lua_newtable(L);
  for (i = 0; globals[i] != NULL; i++) {
    lua_getglobal(L, globals[i]);
    lua_setfield(L, -2, globals[i]);
  }
  lua_newtable(L); /* os: the clock only */
  lua_getglobal(L, "os");
  lua_getfield(L, -1, "clock");
  lua_setfield(L, -3, "clock");
  lua_pop(L, 1);
  lua_setfield(L, -2, "os");
  luaL_newlib(L, host_funcs);
  lua_pushinteger(L, SAVE_AT);
  lua_setfield(L, -2, "save_at");
  lua_pushinteger(L, CONFIRM_AT);
  lua_setfield(L, -2, "confirm_at");
  lua_setfield(L, -2, "host");
}

/* Loads p into a sandbox of its own, in a group of its own, and runs it. */
static void load_plugin (lua_State *L, Plugin *p) {
  int group, env;
  lua_rawgeti(L, LUA_REGISTRYINDEX, H.perfmon_ref);
  /* group = perfmon.group{ name = p->name, kind = "plugin" } */
  lua_getfield(L, -1, "group");
  lua_createtable(L, 0, 2);
  lua_pushstring(L, p->name);
  lua_setfield(L, -2, "name");
  lua_pushliteral(L, "plugin");
  lua_setfield(L, -2, "kind");
  lua_call(L, 1, 1);
  group = lua_gettop(L);
  lua_getfield(L, group, "id");
  p->id = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  push_sandbox(L);
  env = lua_gettop(L);
  /* main = perfmon.loadfile(path, env, group) */
  lua_getfield(L, group - 1, "loadfile");
  lua_pushfstring(L, "%s/tests/host/plugins/%s.lua", H.root, p->name);
  lua_pushvalue(L, env);
  lua_pushvalue(L, group);
  lua_call(L, 3, 2);
  if (lua_isnil(L, -2))
    luaL_error(L, "perfmon.loadfile: %s", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_call(L, 0, 0); /* runs the plugin's main chunk */
  if (lua_getfield(L, env, "on_event") != LUA_TFUNCTION)
    luaL_error(L, "plugin %s defines no on_event function", p->name);
  p->handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, group - 2);
}

static int setup (lua_State *L) {
  int i;
  /* require("perfmon") must find lua/perfmon/init.lua, and the C core
     already loaded: it is compiled into this program. */
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua", H.root, H.root);
  lua_setfield(L, -2, "path");
  lua_pushliteral(L, ""); /* never a core.so from disk */
  lua_setfield(L, -2, "cpath");
  lua_pop(L, 1);
  luaL_requiref(L, "perfmon.core", luaopen_perfmon_core, 0);
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "perfmon");
  lua_call(L, 1, 1);
  H.perfmon_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  for (i = 0; i < NPLUGINS; i++)
    load_plugin(L, &H.plugins[i]);

  /* mon = perfmon.monitor{ "jank", "ticks", "blocking" [, mode = "sampled"] } */
  lua_rawgeti(L, LUA_REGISTRYINDEX, H.perfmon_ref);
  lua_getfield(L, -1, "monitor");
  lua_createtable(L, 3, 1);
  lua_pushliteral(L, "jank");
  lua_rawseti(L, -2, 1);
  lua_pushliteral(L, "ticks");
  lua_rawseti(L, -2, 2);
  lua_pushliteral(L, "blocking");
  lua_rawseti(L, -2, 3);
  lua_pushstring(L, H.sampled ? "sampled" : "exact");
  lua_setfield(L, -2, "mode");
  lua_call(L, 1, 1);
  H.monitor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  return 0;
}

/* before = mon:snapshot() */
static int snapshot_before (lua_State *L) {
  snap_call_method(L, H.monitor_ref, "snapshot");
  H.before_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** The report: d = mon:snapshot():subtract(before), then mon:close()
** =======================================================
*/

static int report (lua_State *L) {
  int d, i;
  d = snap_since(L, H.monitor_ref, H.before_ref);
  lua_getfield(L, d, "process");
  snap_read_stats(L, &H.process);
  lua_getfield(L, d, "groups");
  for (i = 0; i < NPLUGINS; i++)
    snap_read_group(L, H.plugins[i].id, &H.plugins[i].pm);
  snap_call_method(L, H.monitor_ref, "close");
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** Checks
** =======================================================
*/

static void print_row (const char *name, long long cpu_us, long long ticks,
                       long long blocking_us, const long long *durations,
                       long long longest) {
  char hist[64];
  int k, n = 0;
  for (k = 0; k < NDURATIONS && n < (int)sizeof(hist); k++)
    n += snprintf(hist + n, sizeof(hist) - (size_t)n, "%s%lld", k ? " " : "",
                  durations[k]);
  printf("%-16s %10lld %6lld %12lld  %-24s %7lld\n", name, cpu_us, ticks,
         blocking_us, hist, longest);
}

static void print_table (void) {
  int i, k;
  printf("\n%-16s %10s %6s %12s  %-24s %7s\n", "group", "cpu_us", "ticks",
         "blocking_us", "durations (>=1,2,4..ms)", "longest");
  for (i = 0; i < NPLUGINS; i++) {
    Plugin *p = &H.plugins[i];
    long long truth[NDURATIONS], longest = 0;
    print_row(p->pm.name, p->pm.cpu_us, p->pm.ticks, p->pm.blocking_us,
              p->pm.durations, p->pm.longest);
    for (k = 0; k < NDURATIONS; k++) {
      truth[k] = p->durations[k];
      if (truth[k] > 0)
        longest = k + 1;
    }
    print_row("  host measured", llround(p->cpu_us), p->calls,
              i == NOTES ? llround(H.blocked_us) : 0, truth, longest);
  }
  print_row("process", H.process.cpu_us, H.process.ticks, H.process.blocking_us,
            H.process.durations, H.process.longest);
  printf("%-16s %10lld %6ld %12lld\n\n", "  host measured",
         llround(H.loop_cpu_us), H.events, llround(H.blocked_us));
  printf("events that waited for the CPU (undeclared, > %d us): %ld of %ld; "
         "the longest wait: %.0f us\n\n",
         DISTURBED_US, H.disturbed, H.events, H.longest_wait_us);
}

static void check_near (const char *what, double got, double want,
                        double slack) {
  if (fabs(got - want) > slack)
    fail("%s is %.0f, expected %.0f +- %.0f", what, got, want, slack);
}

/* Ticks, and the histogram: each bucket as the host measured it, give or
** take the plugin's events that were too close to call. */
static void check_plugin (Plugin *p) {
  char what[96];
  int k;
  snprintf(what, sizeof(what), "%s ticks", p->name);
  check_near(what, (double)p->pm.ticks, (double)p->calls, 0);
  for (k = 0; k < NDURATIONS; k++)
    if (p->uncertain[k] > 0)
      printf("perfmon-host: note: %s durations[%d]: %ld event(s) too close to "
             "call (near the edge, or waited for the CPU)\n",
             p->name, k + 1, p->uncertain[k]);
  for (k = 0; k < NDURATIONS; k++)
    if (llabs(p->pm.durations[k] - p->durations[k]) > p->uncertain[k])
      fail("%s durations[%d] is %lld, the host measured %ld events of at "
           "least %d ms",
           p->name, k + 1, p->pm.durations[k], p->durations[k], 1 << k);
  for (k = NDURATIONS; k > 0 && p->pm.durations[k - 1] == 0; k--)
    ;
  if (p->pm.longest != k)
    fail("%s longest is %lld, its durations say %d", p->name, p->pm.longest, k);
}

/* A sampled monitor: each sample charges the CPU time since the one
** before (a scheduler tick's, 4 ms at HZ=250) to the groups on the stack.
** The indexer takes nearly all of it, so its share is close; the notes
** cost microseconds, and a sample that finds them is one span at most,
** never the nested loop's work (its events run the indexer), which the
** notes spun.  No group ticks or blocking time (the process's are exact),
** and no histogram check: a group's time in a 5 ms event is within a
** sample's span of its own. */
static void check_sampled (void) {
  Plugin *heavy = &H.plugins[INDEXER], *light = &H.plugins[NOTES];
  check_near("indexer cpu_us", (double)heavy->pm.cpu_us, heavy->cpu_us,
             CPU_TOLERANCE * heavy->cpu_us + SAMPLE_SPAN_US);
  check_near("notes cpu_us", (double)light->pm.cpu_us, light->cpu_us,
             SAMPLE_SPAN_US);
  check_near("indexer ticks", (double)heavy->pm.ticks, 0, 0);
  check_near("notes blocking_us", (double)light->pm.blocking_us, 0, 0);
  check_near("process blocking_us", (double)H.process.blocking_us, H.blocked_us,
             BLOCKING_SLACK_US);
}

/* An exact monitor: every figure of each group. */
static void check_exact (void) {
  Plugin *heavy = &H.plugins[INDEXER], *light = &H.plugins[NOTES];
  double blocked = H.blocked_us;

  /* CPU time: the indexer within 25% of the truth; the notes close to its
     own small truth (give or take what its calls waited for the CPU, which
     perfmon's cycles count), and far below the indexer */
  check_near("indexer cpu_us", (double)heavy->pm.cpu_us, heavy->cpu_us,
             CPU_TOLERANCE * heavy->cpu_us);
  check_near("notes cpu_us", (double)light->pm.cpu_us, light->cpu_us,
             0.5 * light->cpu_us + SMALL_CPU_SLACK_US + light->waited_us);
  if (light->pm.cpu_us * FAR_BELOW >= heavy->pm.cpu_us)
    fail("notes cpu_us (%lld) is not far below indexer cpu_us (%lld)",
         light->pm.cpu_us, heavy->pm.cpu_us);

  /* blocking: the sleep goes to the group that ran around it, and the
     process; never to the other group */
  check_near("notes blocking_us", (double)light->pm.blocking_us, blocked,
             BLOCKING_SLACK_US);
  check_near("indexer blocking_us", (double)heavy->pm.blocking_us, 0, 0);
  check_near("process blocking_us", (double)H.process.blocking_us, blocked,
             BLOCKING_SLACK_US);

  /* ticks and histograms */
  check_plugin(heavy);
  check_plugin(light);
}

static void check_results (void) {
  Plugin *heavy = &H.plugins[INDEXER], *light = &H.plugins[NOTES];

  /* the run itself went as designed */
  if (H.saves != 1 || H.nested_loops != 1)
    fail("the run went wrong: %ld saves, %ld nested loops (expected 1, 1)",
         H.saves, H.nested_loops);
  if (heavy->errors != EVENTS / 10 || light->errors != 0)
    fail("the run went wrong: %ld indexer errors (expected %d), %ld notes "
         "errors",
         heavy->errors, EVENTS / 10, light->errors);

  if (H.sampled)
    check_sampled();
  else
    check_exact();

  /* the process: the thread's CPU time over the loop; its ticks count the
     events, and an event interrupted by a nested loop counts twice, once
     per half (docs/ARCHITECTURE.md, known limits) */
  check_near("process cpu_us", (double)H.process.cpu_us, H.loop_cpu_us,
             PROCESS_SLACK * H.loop_cpu_us + 1000);
  check_near("process ticks", (double)H.process.ticks,
             (double)(H.events + H.nested_loops), 0);
  /* the groups share no code: together at most the process.  Sampled,
     their time is made of the samples' spans of the thread's CPU clock,
     read at other instants than the process's windows: a small margin */
  if (heavy->pm.cpu_us + light->pm.cpu_us >
      H.process.cpu_us + (H.sampled ? SAMPLED_SUM_SLACK_US : 0))
    fail("the groups' cpu_us (%lld + %lld) exceed the process's (%lld)",
         heavy->pm.cpu_us, light->pm.cpu_us, H.process.cpu_us);
}

/* }====================================================== */

/* Runs f in protected mode; a Lua error there ends the program. */
static void protect (lua_State *L, lua_CFunction f, const char *what) {
  lua_pushcfunction(L, f);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK)
    die(what, lua_tostring(L, -1));
}

int main (int argc, char **argv) {
  lua_State *L, *bare;
  long i;
  double c0;

  H.root = argc > 1 ? argv[1] : ".";
  H.sampled = argc > 2 && strcmp(argv[2], "sampled") == 0;
  if (argc > 3 || (argc > 2 && !H.sampled)) {
    fprintf(stderr, "usage: perfmon-host [ROOT [sampled]]\n");
    return 2;
  }

  /* A state perfmon was never loaded in: the C API says so. */
  bare = luaL_newstate();
  if (bare == NULL)
    die("luaL_newstate", "not enough memory");
  expect(perfmon_event_begin(bare), PERFMON_ENOTLOADED,
         "perfmon_event_begin(a state without perfmon)");
  lua_close(bare);

  L = luaL_newstate();
  if (L == NULL)
    die("luaL_newstate", "not enough memory");
  luaL_openlibs(L);
  protect(L, setup, "setup");
  printf("perfmon-host: plugins %s (group %d) and %s (group %d) loaded; "
         "%d events\n",
         H.plugins[INDEXER].name, H.plugins[INDEXER].id, H.plugins[NOTES].name,
         H.plugins[NOTES].id, EVENTS);

  /* Misuse is reported, never raised, and changes nothing. */
  expect(perfmon_event_end(L), PERFMON_EMISUSE,
         "perfmon_event_end without perfmon_event_begin");
  expect(perfmon_nested_leave(L), PERFMON_EMISUSE,
         "perfmon_nested_leave without perfmon_nested_enter");
  expect(perfmon_blocking_end(L), PERFMON_EMISUSE,
         "perfmon_blocking_end without perfmon_blocking_begin");

  c0 = thread_cpu_us();
  protect(L, snapshot_before, "snapshot");
  if (H.sampled && lua_gethook(L) != NULL)
    fail("a sampled monitor set a debug hook");

  for (i = 1; i <= EVENTS; i++) {
    Event e;
    event_begin(L, &e);
    if (i == 1)
      expect(perfmon_event_begin(L), PERFMON_EMISUSE,
             "perfmon_event_begin inside an event");
    call_plugin(L, INDEXER, i);
    call_plugin(L, NOTES, i);
    event_end(L, &e);
  }

  protect(L, report, "snapshot");
  H.loop_cpu_us = thread_cpu_us() - c0;
  if (lua_gethook(L) != NULL)
    fail("a debug hook is still set after the monitor was closed");

  print_table();
  check_results();
  lua_close(L);

  if (H.failures > 0) {
    fprintf(stderr, "perfmon-host: %d check(s) failed\n", H.failures);
    return EXIT_FAILURE;
  }
  printf("perfmon-host: ok\n");
  return EXIT_SUCCESS;
}
