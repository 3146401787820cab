/*
** lstats.c -- figures out to Lua (lstats.h).
*/
#include "lstats.h"

#include <stddef.h>
#include <string.h>

#include <lauxlib.h>

#include "fleet.h"
#include "hook.h"
#include "largs.h"
#include "lmonitor.h"
#include "sampled.h"
#include "stopwatch.h"

/*
** {======================================================
** Statistics
** =======================================================
*/

static void set_number (lua_State *L, const char *k, double v) {
  lua_pushinteger(L, (lua_Integer)v); /* whole microseconds */
  lua_setfield(L, -2, k);
}

/* t -> t; sets t[field] = {counts...} */
static void set_histogram (lua_State *L, const char *field,
                           const uint64_t *counts) {
  int k;
  lua_createtable(L, PM_DURATIONS, 0);
  for (k = 0; k < PM_DURATIONS; k++) {
    lua_pushinteger(L, (lua_Integer)counts[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, field);
}

/* A group's figures: the one list of them, which push_stats writes and
** luaopen exports as core.figures ({ name, unit, kind } each, in this
** order) for the Lua modules that read stats (init.lua's arithmetic and
** JSON, openmetrics.lua; perfmon.figures).  unit: "us" (whole µs),
** "bytes" or "count"; kind: "counter" (a total) or "histogram" (`buckets`
** = PM_DURATIONS counts, the k-th the events of at least 2^(k-1) ms: each
** holds those above it). */
typedef struct pm_Figure {
  const char *name, *unit, *kind;
  size_t offset; /* in pm_Stats: a double ("us"), a uint64_t, or the
                 ** histogram's array of them */
} pm_Figure;

#define FIGURE(name, unit, kind, field)                                        \
  { name, unit, kind, offsetof(pm_Stats, field) }
static const pm_Figure figures[] = {
    FIGURE("user_us", "us", "counter", cpu.user_us),
    FIGURE("system_us", "us", "counter", cpu.system_us),
    FIGURE("cpu_us", "us", "counter", cpu.cpu_us),
    FIGURE("self_user_us", "us", "counter", self.user_us),
    FIGURE("self_system_us", "us", "counter", self.system_us),
    FIGURE("self_us", "us", "counter", self.cpu_us),
    FIGURE("blocking_us", "us", "counter", blocking_us),
    FIGURE("alloc_bytes", "bytes", "counter", alloc.bytes),
    FIGURE("alloc_count", "count", "counter", alloc.count),
    FIGURE("self_alloc_bytes", "bytes", "counter", self_alloc.bytes),
    FIGURE("self_alloc_count", "count", "counter", self_alloc.count),
    FIGURE("ticks", "count", "counter", ticks),
    FIGURE("samples", "count", "counter", samples),
    FIGURE("self_samples", "count", "counter", self_samples),
    FIGURE("durations", "count", "histogram", durations),
    FIGURE("self_durations", "count", "histogram", self_durations),
    FIGURE("events", "count", "counter", events),
    FIGURE("event_us", "us", "counter", event_us),
    FIGURE("self_event_us", "us", "counter", self_event_us),
    {NULL, NULL, NULL, 0}};

/* t -> t; sets t[f->name] to st's figure f */
static void set_figure (lua_State *L, const pm_Figure *f, const pm_Stats *st) {
  const char *at = (const char *)st + f->offset;
  if (f->kind[0] == 'h')
    set_histogram(L, f->name, (const uint64_t *)(const void *)at);
  else if (f->unit[0] == 'u')
    set_number(L, f->name, *(const double *)(const void *)at);
  else {
    lua_pushinteger(L, (lua_Integer) * (const uint64_t *)(const void *)at);
    lua_setfield(L, -2, f->name);
  }
}

/* ... -> ... core.figures */
static void push_figures (lua_State *L) {
  const pm_Figure *f;
  int k = 0;
  lua_createtable(L, (int)(sizeof(figures) / sizeof(figures[0])) - 1, 0);
  for (f = figures; f->name != NULL; f++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, f->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, f->unit);
    lua_setfield(L, -2, "unit");
    lua_pushstring(L, f->kind);
    lua_setfield(L, -2, "kind");
    if (f->kind[0] == 'h') {
      lua_pushinteger(L, PM_DURATIONS);
      lua_setfield(L, -2, "buckets");
    }
    lua_rawseti(L, -2, ++k);
  }
}

/* ... -> ... stats */
static void push_stats (lua_State *L, int id, const char *name,
                        const char *kind, const pm_Stats *st, const int *ids,
                        int nids, int library) {
  const pm_Figure *f;
  int k;
  lua_createtable(L, 0, 24);
  lua_pushinteger(L, id);
  lua_setfield(L, -2, "id");
  if (library) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "library");
  }
  lua_pushstring(L, name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  lua_createtable(L, nids, 0);
  for (k = 0; k < nids; k++) {
    lua_pushinteger(L, ids[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "memberships");
  for (f = figures; f->name != NULL; f++)
    set_figure(L, f, st);
}

/* core.stats() -> { time, process, groups = { [id] = stats } }, with
** hook_lost = true when perfmon's hook was taken while monitoring */
static int build_stats (lua_State *L) {
  pm_State *S = lua_touserdata(L, 1);
  int i, ids[PM_ENV_GROUPS + 2], lost = lua_toboolean(L, 2);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)pm_realtime_us());
  lua_setfield(L, -2, "time");
  if (lost) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "hook_lost");
  }
  push_stats(L, 0, "process", "process", &S->e.process, ids, 0, 0);
  lua_setfield(L, -2, "process");
  lua_createtable(L, 0, S->e.ngroups - S->e.ndead);
  for (i = 0; i < S->e.ngroups; i++) {
    pm_Group *g = S->e.groups[i];
    int n;
    if (g->dead)
      continue;
    n = pm_memberships(g, ids, PM_ENV_GROUPS + 2);
    push_stats(L, g->id, g->name, g->kind, &g->total, ids, n, g->library);
    lua_rawseti(L, -2, g->id);
  }
  lua_setfield(L, -2, "groups");
  return 1;
}

/* list k -> list k+3: sets id, cpu_us, self_us at k+1.. */
static void put_times (lua_State *L, int *k, int id, const pm_Stats *st) {
  lua_pushinteger(L, id);
  lua_rawseti(L, 1, ++*k);
  lua_pushinteger(L, (lua_Integer)st->cpu.cpu_us); /* whole µs, as stats */
  lua_rawseti(L, 1, ++*k);
  lua_pushinteger(L, (lua_Integer)st->self.cpu_us);
  lua_rawseti(L, 1, ++*k);
}

/* core.times(list) -> n, lost: writes into list[1..n] the process's and
** each live group's CPU and self µs, as core.stats gives them (0, cpu_us,
** self_us, then id, cpu_us, self_us for each group), and whether
** perfmon's hook is known lost.  For a program that reads the totals
** between every two short pieces of work (perfmon.busted, at every test):
** the caller's table is reused, and the read is one commit (one read of
** the thread's CPU clock), where a snapshot also sweeps the groups, walks
** every thread for a lost hook and leaves its own work out of the
** measures (four more clock reads).  The cost of the list, a few
** integers a group, is the caller's time, as its other work is. */
static int l_times (lua_State *L) {
  pm_State *S = pm_lstate(L);
  int i, k = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  pm_hook_settle(L, S); /* checks the hook of this thread and the main one */
  pm_sw_snapshot(&S->e);
  put_times(L, &k, 0, &S->e.process);
  for (i = 0; i < S->e.ngroups; i++) {
    pm_Group *g = S->e.groups[i];
    if (!g->dead)
      put_times(L, &k, g->id, &g->total);
  }
  lua_pushinteger(L, k);
  lua_pushboolean(L, S->hook_lost);
  return 2;
}

/* core.window() -> the sample window's figures (stopwatch.h), or nil
** before any: { since_us, until_us, last_us (its last sample: the figures
** cover since_us to last_us; core.wall_us's clock), open, cpu_us,
** missed_us, samples, groups = { [id] = { cpu_us, self_us, samples,
** self_samples } } }, the groups its samples charged; whole µs, as stats */
static void push_window (lua_State *L, pm_State *S) {
  const pm_SampleWindow *w = &S->e.sample_window;
  int i;
  lua_createtable(L, 0, 7);
  lua_pushnumber(L, w->since);
  lua_setfield(L, -2, "since_us");
  lua_pushnumber(L, w->until);
  lua_setfield(L, -2, "until_us");
  lua_pushnumber(L, w->last);
  lua_setfield(L, -2, "last_us");
  lua_pushboolean(L, w->open);
  lua_setfield(L, -2, "open");
  set_number(L, "cpu_us", w->cpu_us);
  set_number(L, "missed_us", w->missed_us);
  lua_pushinteger(L, (lua_Integer)w->samples);
  lua_setfield(L, -2, "samples");
  lua_newtable(L);
  for (i = 0; i < S->e.ngroups; i++) {
    const pm_Group *g = S->e.groups[i];
    const pm_WindowStats *gw = &g->sample_window;
    if (g->dead || gw->id != w->id)
      continue;
    lua_createtable(L, 0, 4);
    set_number(L, "cpu_us", gw->cpu_us);
    set_number(L, "self_us", gw->self_us);
    lua_pushinteger(L, (lua_Integer)gw->samples);
    lua_setfield(L, -2, "samples");
    lua_pushinteger(L, (lua_Integer)gw->self_samples);
    lua_setfield(L, -2, "self_samples");
    lua_rawseti(L, -2, g->id);
  }
  lua_setfield(L, -2, "groups");
}

/* The tables are perfmon's own work, left out of every measure (they take
** milliseconds with thousands of groups): built protected, so that a
** memory error ends that too. */
static int snapshot_with (lua_State *L, lua_CFunction build) {
  pm_State *S = pm_lstate(L);
  int lost = pm_hook_lost(L, S), status;
  pm_hook_settle(L, S);
  pm_sw_snapshot(&S->e);
  pm_hook_sweep(S, 0);
  lua_pushcfunction(L, build);
  lua_pushlightuserdata(L, S);
  lua_pushboolean(L, lost);
  pm_sw_own(&S->e, 1);
  status = lua_pcall(L, 2, 1, 0);
  pm_sw_own(&S->e, 0);
  if (status != LUA_OK)
    return lua_error(L);
  return 1;
}

static int l_stats (lua_State *L) {
  return snapshot_with(L, build_stats);
}

static int l_window (lua_State *L) {
  pm_State *S = pm_lstate(L);
  if (S->e.sample_window.id == 0)
    return 0;
  push_window(L, S);
  return 1;
}

/* core.fleet_publish(json, label): this state's entry on the process's
** board (fleet.h) holds json from now on */
static int l_fleet_publish (lua_State *L) {
  pm_State *S = pm_lstate(L);
  size_t len;
  const char *json = luaL_checklstring(L, 1, &len);
  size_t llen;
  const char *label = luaL_checklstring(L, 2, &llen);
  if (strlen(label) != llen) /* fleet.lua says so first */
    pm_larg_error(L, 2, "perfmon.fleet.publish", "the label holds a NUL byte");
  if (!pm_fleet_put(&S->fleet_id, label, json, len))
    return luaL_error(L, "not enough memory");
  lua_pushinteger(L, (lua_Integer)S->fleet_id);
  return 1;
}

typedef struct Entry {
  uint64_t id;
  const char *label, *json;
  size_t len;
  int closed;
} Entry;

/* (list, entry) -> (); appends {id, label, json, closed} to list */
static int add_entry (lua_State *L) {
  const Entry *e = lua_touserdata(L, 2);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)e->id);
  lua_setfield(L, -2, "id");
  lua_pushstring(L, e->label);
  lua_setfield(L, -2, "label");
  lua_pushlstring(L, e->json, e->len);
  lua_setfield(L, -2, "json");
  lua_pushboolean(L, e->closed);
  lua_setfield(L, -2, "closed");
  lua_rawseti(L, 1, (lua_Integer)lua_rawlen(L, 1) + 1);
  return 0;
}

/* ... list -> ... list: each entry protected, as the board's copies are
** freed only when this returns */
static int push_entry (void *arg, uint64_t id, const char *label,
                       const char *json, size_t len, int closed) {
  lua_State *L = arg;
  Entry e;
  e.id = id;
  e.label = label;
  e.json = json;
  e.len = len;
  e.closed = closed;
  lua_pushcfunction(L, add_entry);
  lua_pushvalue(L, -2);
  lua_pushlightuserdata(L, &e);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* core.fleet_entries() -> { {id, label, json, closed}, ... } */
static int l_fleet_entries (lua_State *L) {
  luaL_checkstack(L, 4, NULL);
  lua_newtable(L);
  if (!pm_fleet_each(push_entry, L))
    return luaL_error(L, "not enough memory");
  return 1;
}

/* core.counts() -> the monitors open, the nested loops open (0: the
** host's loop) and whether an event is open in the current loop: what a
** program may leave behind, for perfmon.busted to read around every test
** without info()'s table */
static int l_counts (lua_State *L) {
  pm_State *S = pm_lstate(L);
  lua_pushinteger(L, S->e.monitors);
  lua_pushinteger(L, S->e.loop);
  lua_pushboolean(L, S->e.in_event[S->e.loop]);
  return 3;
}

/* core.info() -> what perfmon runs on and holds */
/* An entry of info().unmatched_sources, into the list on the top. */
static void push_unmatched (void *ud, const char *prefix, size_t len,
                            const pm_Group *g) {
  lua_State *L = ud;
  lua_createtable(L, 0, 3);
  lua_pushlstring(L, prefix, len);
  lua_setfield(L, -2, "prefix");
  lua_pushstring(L, g->name);
  lua_setfield(L, -2, "group");
  lua_pushinteger(L, g->id);
  lua_setfield(L, -2, "id");
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

static int l_info (lua_State *L) {
  pm_State *S = pm_lstate(L);
  lua_createtable(L, 0, 10);
  lua_pushstring(L, pm_clock_name());
  lua_setfield(L, -2, "clock");
  lua_pushstring(L, pm_hook_path(S));
  lua_setfield(L, -2, "path");
  lua_pushstring(L, S->trap_direct ? "direct" : "lua_sethook");
  lua_setfield(L, -2, "sethook");
  lua_pushstring(L, S->proto_direct ? "prototype" : "source");
  lua_setfield(L, -2, "chunks");
  lua_pushstring(L, S->proto_heap ? "heap" : "hook");
  lua_setfield(L, -2, "chunks_found");
  lua_pushinteger(L, S->e.monitors);
  lua_setfield(L, -2, "monitors");
  lua_pushinteger(L, S->exact);
  lua_setfield(L, -2, "exact_monitors");
  lua_pushinteger(L, S->nsampled);
  lua_setfield(L, -2, "sampled_monitors");
  lua_pushstring(L, pm_sampled_timer(S)); /* nil while none is open */
  lua_setfield(L, -2, "sampled_timer");
  lua_pushinteger(L, (lua_Integer)S->e.samples);
  lua_setfield(L, -2, "samples");
  lua_pushstring(L, S->running_direct ? "resumes" : "tracked");
  lua_setfield(L, -2, "running");
  lua_pushboolean(L, pm_hook_lost(L, S));
  lua_setfield(L, -2, "hook_lost");
  lua_pushinteger(L, S->e.ngroups - S->e.ndead);
  lua_setfield(L, -2, "groups");
  lua_pushinteger(L,
                  (lua_Integer)(S->e.bytes + pm_map_bytes(&S->e.fns) +
                                pm_map_bytes(&S->e.known) + S->e.keyed.size));
  lua_setfield(L, -2, "bytes");
  lua_pushinteger(L, pm_hook_capacity(S));
  lua_setfield(L, -2, "shadow_capacity");
  lua_pushinteger(L, (lua_Integer)(sizeof(pm_Group) + sizeof(pm_Env)));
  lua_setfield(L, -2, "bytes_per_group");
  lua_pushinteger(L, (lua_Integer)S->e.window);
  lua_setfield(L, -2, "windows");
  lua_pushinteger(L, (lua_Integer)S->e.cycle_reads);
  lua_setfield(L, -2, "cycle_reads");
  lua_pushinteger(L, S->e.nctxs);
  lua_setfield(L, -2, "contexts");
  lua_pushinteger(L, (lua_Integer)S->e.ctx_refused);
  lua_setfield(L, -2, "contexts_refused");
  lua_pushinteger(L, S->e.ndead);
  lua_setfield(L, -2, "dead_groups");
  lua_newtable(L);
  pm_sources_unmatched(&S->e, push_unmatched, L);
  lua_setfield(L, -2, "unmatched_sources");
  return 1;
}

/* }====================================================== */

static const luaL_Reg stats_funcs[] = {{"stats", l_stats},
                                       {"times", l_times},
                                       {"window", l_window},
                                       {"info", l_info},
                                       {"counts", l_counts},
                                       {"fleet_publish", l_fleet_publish},
                                       {"fleet_entries", l_fleet_entries},
                                       {NULL, NULL}};

void pm_lstats_register (lua_State *L) {
  luaL_setfuncs(L, stats_funcs, 0);
  push_figures(L);
  lua_setfield(L, -2, "figures");
}
