/*
** lstats.c -- figures out to Lua (lstats.h).
*/
#include "lstats.h"

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

/* ... -> ... stats */
static void push_stats (lua_State *L, int id, const char *name,
                        const char *kind, const pm_Stats *st, const int *ids,
                        int nids, int library) {
  int k, longest = 0;
  lua_createtable(L, 0, 21);
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
  set_number(L, "user_us", st->cpu.user_us);
  set_number(L, "system_us", st->cpu.system_us);
  set_number(L, "cpu_us", st->cpu.cpu_us);
  set_number(L, "self_user_us", st->self.user_us);
  set_number(L, "self_system_us", st->self.system_us);
  set_number(L, "self_us", st->self.cpu_us);
  set_number(L, "blocking_us", st->blocking_us);
  lua_pushinteger(L, (lua_Integer)st->alloc.bytes);
  lua_setfield(L, -2, "alloc_bytes");
  lua_pushinteger(L, (lua_Integer)st->alloc.count);
  lua_setfield(L, -2, "alloc_count");
  lua_pushinteger(L, (lua_Integer)st->self_alloc.bytes);
  lua_setfield(L, -2, "self_alloc_bytes");
  lua_pushinteger(L, (lua_Integer)st->self_alloc.count);
  lua_setfield(L, -2, "self_alloc_count");
  lua_pushinteger(L, (lua_Integer)st->ticks);
  lua_setfield(L, -2, "ticks");
  lua_pushinteger(L, (lua_Integer)st->samples);
  lua_setfield(L, -2, "samples");
  lua_pushinteger(L, (lua_Integer)st->self_samples);
  lua_setfield(L, -2, "self_samples");
  set_histogram(L, "durations", st->durations);
  set_histogram(L, "self_durations", st->self_durations);
  for (k = 0; k < PM_DURATIONS; k++)
    if (st->durations[k] > 0)
      longest = k + 1;
  lua_pushinteger(L, (lua_Integer)st->events);
  lua_setfield(L, -2, "events");
  set_number(L, "event_us", st->event_us);
  set_number(L, "self_event_us", st->self_event_us);
  lua_pushinteger(L, longest);
  lua_setfield(L, -2, "longest");
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

/* ... list k -> ... list k+3: appends id, cpu_us, self_us */
static void push_times (lua_State *L, int *k, int id, const pm_Stats *st) {
  lua_pushinteger(L, id);
  lua_rawseti(L, -2, ++*k);
  lua_pushinteger(L, (lua_Integer)st->cpu.cpu_us); /* whole µs, as stats */
  lua_rawseti(L, -2, ++*k);
  lua_pushinteger(L, (lua_Integer)st->self.cpu_us);
  lua_rawseti(L, -2, ++*k);
}

/* core.times() -> { 0, cpu_us, self_us, id, cpu_us, self_us, ... }: the
** process's and each live group's CPU and self µs, as core.stats gives
** them, in one flat list.  For a program that reads the totals between
** every two short pieces of work (perfmon.busted, at every test): one
** table, where core.stats makes four a group, and the garbage of which
** would be collected in the work measured next. */
static int build_times (lua_State *L) {
  pm_State *S = lua_touserdata(L, 1);
  int i, k = 0;
  lua_createtable(L, 3 * (S->e.ngroups - S->e.ndead + 1), 0);
  push_times(L, &k, 0, &S->e.process);
  for (i = 0; i < S->e.ngroups; i++) {
    pm_Group *g = S->e.groups[i];
    if (!g->dead)
      push_times(L, &k, g->id, &g->total);
  }
  return 1;
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

static int l_times (lua_State *L) {
  return snapshot_with(L, build_times);
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
                                       {"info", l_info},
                                       {"counts", l_counts},
                                       {"fleet_publish", l_fleet_publish},
                                       {"fleet_entries", l_fleet_entries},
                                       {NULL, NULL}};

void pm_lstats_register (lua_State *L) {
  luaL_setfuncs(L, stats_funcs, 0);
}
