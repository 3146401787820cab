/*
** lperfmon.c -- perfmon.core, the Lua binding of the C core.
**
** Argument checking and the group userdata live here; monitors, snapshots
** and their arithmetic live in lua/perfmon/init.lua, which is the API users
** see.  Functions that users call directly (group, attach, detach, the
** event markers) are exported from here as they are, so that their errors
** name the function the user called.
*/
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "alert.h"
#include "lalert.h"
#include "lupvalues.h"
#include "fleet.h"
#include "hook.h"
#include "path.h"
#include "resolve.h"
#include "perfmon.h"
#include "sampled.h"
#include "profiler/profiler.h"
#include "stopwatch.h"
#include "watch.h"

#define GROUP_MT "perfmon.group"

static const char *const probe_names[] = {"jank",   "blocking", "ticks",
                                          "chunks", "memory",   NULL};

static pm_State *state (lua_State *L) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    luaL_error(L, "perfmon: the state is closing");
  return S;
}

static void *nomem (lua_State *L) {
  luaL_error(L, "not enough memory");
  return NULL;
}

/*
** {======================================================
** Argument errors
** =======================================================
*/

/* Argument errors name the public function (perfmon.group), never the
** name Lua finds for the caller, which is "group", a local's name, or
** "perfmon.core.group" depending on how it was called. */
static int arg_error (lua_State *L, int arg, const char *fname,
                      const char *msg) {
  return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, fname, msg);
}

/* Argument arg is of type t, never converted (a number is no string). */
static void check_type (lua_State *L, int arg, const char *fname, int t) {
  if (lua_type(L, arg) != t)
    arg_error(L, arg, fname,
              lua_pushfstring(L, "%s expected, got %s", lua_typename(L, t),
                              luaL_typename(L, arg)));
}

/* Pushes the string at idx quoted as Lua's %q writes it, on one line
** (a string that is not valid UTF-8 is a message too): what was given,
** whatever its bytes; another value as tostring shows it. */
static const char *push_quoted (lua_State *L, int idx) {
  luaL_Buffer b;
  size_t len, i;
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    return luaL_tolstring(L, idx, NULL);
  s = lua_tolstring(L, idx, &len);
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '"');
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, (char)c);
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8]; /* \ddd when a digit follows, as %q */
      int digit = i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9';
      snprintf(esc, sizeof(esc), digit ? "\\%03d" : "\\%d", c);
      luaL_addstring(&b, esc);
    } else {
      luaL_addchar(&b, (char)c);
    }
  }
  luaL_addchar(&b, '"');
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* Every key of the option table at 1 is a string of fields (NULL-ended)
** or, with npos > 0, an integer in [1, npos]. */
static void check_fields (lua_State *L, const char *fname,
                          const char *const fields[], lua_Integer npos) {
  lua_pushnil(L);
  while (lua_next(L, 1) != 0) {
    int k = 0;
    lua_pop(L, 1); /* the value */
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *key = lua_tostring(L, -1);
      while (fields[k] != NULL && strcmp(fields[k], key) != 0)
        k++;
      if (fields[k] != NULL && strlen(key) == lua_rawlen(L, -1))
        continue;
    } else if (npos > 0 && lua_isinteger(L, -1)) {
      lua_Integer i = lua_tointeger(L, -1);
      if (i >= 1 && i <= npos)
        continue;
    }
    {
      luaL_Buffer b;
      const char *key =
          lua_type(L, -1) == LUA_TSTRING
              ? push_quoted(L, -1)
              : lua_pushfstring(L, "[%s]", luaL_tolstring(L, -1, NULL));
      luaL_buffinit(L, &b);
      for (k = 0; fields[k] != NULL; k++) {
        if (k > 0)
          luaL_addstring(&b, ", ");
        luaL_addstring(&b, fields[k]);
      }
      luaL_pushresult(&b);
      arg_error(L, 1, fname,
                lua_pushfstring(L, "unknown field %s (%sfields: %s)", key,
                                npos > 0 ? "a list, and " : "",
                                lua_tostring(L, -1)));
    }
  }
}

/* }====================================================== */

/*
** {======================================================
** Groups
** =======================================================
*/

/* A handle's id is negated when it is collected: a finalizer that brings
** it back holds a group that may be freed. */
static pm_Group *check_group (lua_State *L, int arg, const char *fname) {
  int *id = luaL_testudata(L, arg, GROUP_MT);
  if (id == NULL)
    arg_error(L, arg, fname,
              lua_pushfstring(L, "perfmon.group expected, got %s",
                              luaL_typename(L, arg)));
  if (*id <= 0)
    arg_error(L, arg, fname, "perfmon.group was collected");
  return pm_group_get(&state(L)->e, *id);
}

/* A required name field of perfmon.group's table.  The core keeps names
** as C strings, so a NUL byte would cut one silently: it is refused. */
static const char *field_string (lua_State *L, const char *key) {
  const char *s;
  size_t len;
  int t = lua_getfield(L, 1, key);
  if (t == LUA_TNIL)
    arg_error(L, 1, "perfmon.group",
              lua_pushfstring(L, "field '%s' is required (a string)", key));
  if (t != LUA_TSTRING)
    arg_error(L, 1, "perfmon.group",
              lua_pushfstring(L, "field '%s' must be a string, got %s", key,
                              luaL_typename(L, -1)));
  s = lua_tolstring(L, -1, &len);
  if (len == 0)
    arg_error(L, 1, "perfmon.group",
              lua_pushfstring(L, "field '%s' is empty", key));
  if (memchr(s, '\0', len) != NULL)
    arg_error(L, 1, "perfmon.group",
              lua_pushfstring(L, "field '%s' contains a NUL byte: %s", key,
                              push_quoted(L, -1)));
  return s;
}

/* The optional boolean field of perfmon.group's table: false when absent. */
static int field_boolean (lua_State *L, const char *key) {
  int t = lua_getfield(L, 1, key);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    arg_error(L, 1, "perfmon.group",
              lua_pushfstring(L, "field '%s' must be a boolean, got %s", key,
                              luaL_typename(L, -1)));
  return lua_toboolean(L, -1);
}

/* perfmon.group{name = ..., kind = ..., library = false} */
static int l_group (lua_State *L) {
  static const char *const fields[] = {"name", "kind", "library", NULL};
  pm_State *S;
  pm_Group *g;
  int *id, library;
  const char *name, *kind;
  check_type(L, 1, "perfmon.group", LUA_TTABLE);
  check_fields(L, "perfmon.group", fields, 0);
  name = field_string(L, "name"); /* in order: the first bad one is named */
  kind = field_string(L, "kind");
  library = field_boolean(L, "library");
  S = state(L);
  /* a host that makes groups and never takes a snapshot frees them too */
  pm_hook_sweep(S, 1);
  g = pm_group_new(&S->e, name, kind, library);
  if (g == NULL)
    return (nomem(L), 0);
  id = lua_newuserdatauv(L, sizeof(int), 0);
  *id = g->id;
  luaL_setmetatable(L, GROUP_MT);
  return 1;
}

static int group_index (lua_State *L) {
  pm_Group *g = check_group(L, 1, "__index");
  const char *k = lua_tostring(L, 2);
  if (k == NULL)
    lua_pushnil(L);
  else if (strcmp(k, "id") == 0)
    lua_pushinteger(L, g->id);
  else if (strcmp(k, "name") == 0)
    lua_pushstring(L, g->name);
  else if (strcmp(k, "kind") == 0)
    lua_pushstring(L, g->kind);
  else if (strcmp(k, "library") == 0)
    lua_pushboolean(L, g->library);
  else
    lua_pushnil(L);
  return 1;
}

/* The handle is one of the group's references. */
static int group_gc (lua_State *L) {
  int *id = luaL_checkudata(L, 1, GROUP_MT);
  pm_State *S = pm_state_get(L);
  pm_Group *g = (S != NULL && *id > 0) ? pm_group_get(&S->e, *id) : NULL;
  if (g != NULL)
    pm_group_release(&S->e, g);
  *id = -*id;
  return 0;
}

static int group_tostring (lua_State *L) {
  pm_Group *g = check_group(L, 1, "__tostring");
  lua_pushfstring(L, "perfmon.group %d (%s '%s')", g->id, g->kind, g->name);
  return 1;
}

/* core.is_group(x) */
static int l_is_group (lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, GROUP_MT) != NULL);
  return 1;
}

/* perfmon.attach(env, group) */
static int l_attach (lua_State *L) {
  pm_State *S = state(L);
  pm_Env *e;
  pm_Group *g;
  check_type(L, 1, "perfmon.attach", LUA_TTABLE);
  g = check_group(L, 2, "perfmon.attach");
  e = pm_env_get(&S->e, lua_topointer(L, 1), 1);
  if (e == NULL)
    return (nomem(L), 0);
  switch (pm_env_attach(&S->e, e, g)) {
    case PM_ATTACH_FULL:
      return arg_error(L, 1, "perfmon.attach",
                       "environment already has the most groups "
                       "perfmon allows (31)");
    case PM_ATTACH_NOMEM: return (nomem(L), 0);
    default: return 0;
  }
}

/* perfmon.detach(env, group) -> whether it was attached */
static int l_detach (lua_State *L) {
  pm_State *S = state(L);
  pm_Env *e;
  pm_Group *g;
  check_type(L, 1, "perfmon.detach", LUA_TTABLE);
  g = check_group(L, 2, "perfmon.detach");
  e = pm_env_get(&S->e, lua_topointer(L, 1), 0);
  lua_pushboolean(L, e != NULL && pm_env_detach(&S->e, e, g));
  return 1;
}

/* The prefix argument of attach_source and detach_source. */
static const char *check_prefix (lua_State *L, const char *fname, size_t *len) {
  const char *p;
  check_type(L, 1, fname, LUA_TSTRING);
  p = lua_tolstring(L, 1, len);
  if (*len == 0)
    arg_error(L, 1, fname, "the prefix is empty");
  if (strlen(p) != *len)
    arg_error(L, 1, fname, "the prefix holds a NUL byte");
  return p;
}

/* perfmon.attach_source(prefix, group): every chunk whose path begins
** with prefix, both normalised (path.h), or whose name begins with it as
** written, belongs to group */
static int l_attach_source (lua_State *L) {
  pm_State *S = state(L);
  char full[PM_KEY_MAX], named[PM_KEY_MAX];
  const char *path[2];
  size_t len, plen[2];
  const char *prefix = check_prefix(L, "perfmon.attach_source", &len);
  pm_Group *g = check_group(L, 2, "perfmon.attach_source");
  path[0] = full, path[1] = named;
  if (len >= PM_KEY_MAX ||
      (plen[0] = pm_path_normal(S, prefix, len, full, named, &plen[1])) == 0)
    return arg_error(L, 1, "perfmon.attach_source",
                     lua_pushfstring(L,
                                     "the prefix is longer than %d "
                                     "bytes as an absolute path",
                                     PM_KEY_MAX - 1));
  if (!pm_source_attach(&S->e, prefix, len, path, plen, plen[1] > 0 ? 2 : 1, g))
    return (nomem(L), 0);
  return 0;
}

/* perfmon.detach_source(prefix, group) -> whether it was attached */
static int l_detach_source (lua_State *L) {
  pm_State *S = state(L);
  size_t len;
  const char *prefix = check_prefix(L, "perfmon.detach_source", &len);
  pm_Group *g = check_group(L, 2, "perfmon.detach_source");
  lua_pushboolean(L, pm_source_detach(&S->e, prefix, len, g));
  return 1;
}

/* core.chunk(fn): fn is the main function of a chunk just loaded */
static int l_chunk (lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_argcheck(L, !lua_iscfunction(L, 1), 1, "Lua function expected");
  if (!pm_resolve_chunk(L, state(L), 1))
    return (nomem(L), 0);
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** Monitors
** =======================================================
*/

static unsigned check_probes (lua_State *L, int arg) {
  lua_Integer mask = luaL_checkinteger(L, arg);
  luaL_argcheck(L, mask > 0 && mask < (1 << PM_NPROBES), arg,
                "invalid probe mask");
  return (unsigned)mask;
}

/*
** perfmon.monitor's argument is checked here, and only here: init.lua calls
** core.open protected and raises the error again at its caller's line.
*/
static int monitor_argerror (lua_State *L, const char *msg) {
  return arg_error(L, 1, "perfmon.monitor", msg);
}

/* Pushes "jank, blocking, ...": the probes, for a message. */
static const char *probe_list (lua_State *L) {
  luaL_Buffer b;
  int i;
  luaL_buffinit(L, &b);
  for (i = 0; probe_names[i] != NULL; i++) {
    if (i > 0)
      luaL_addstring(&b, ", ");
    luaL_addstring(&b, probe_names[i]);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* The `mode` field of the probes table: 0 exact (the default), 1 sampled. */
static int check_mode (lua_State *L) {
  static const char *const modes[] = {"exact", "sampled", NULL};
  int k = 0;
  size_t len;
  const char *s;
  if (lua_getfield(L, 1, "mode") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  while (s != NULL && modes[k] != NULL &&
         (strlen(modes[k]) != len || memcmp(s, modes[k], len) != 0))
    k++;
  if (s == NULL || modes[k] == NULL)
    monitor_argerror(
        L,
        lua_pushfstring(L, "mode \"exact\" or \"sampled\" expected, got %s",
                        s != NULL ? push_quoted(L, -1) : luaL_typename(L, -1)));
  lua_pop(L, 1);
  return k;
}

/* The `rate_us` field of the probes table, for a sampled monitor: how
** many µs of CPU time between two samples, an integer in
** [PM_RATE_MIN, PM_RATE_MAX] (exported as core.rate_min_us and
** core.rate_max_us, which the plugin watcher checks its option against),
** PM_RATE_DEFAULT without one.  An exact monitor takes none.  Returns 0
** for an exact monitor. */
#define PM_RATE_MIN 100
#define PM_RATE_MAX 1000000
#define PM_RATE_DEFAULT 4000
static uint32_t check_rate (lua_State *L, int sampled) {
  lua_Integer r = 0;
  int isint = 0, number;
  if (lua_getfield(L, 1, "rate_us") == LUA_TNIL) {
    lua_pop(L, 1);
    return sampled ? PM_RATE_DEFAULT : 0;
  }
  if (!sampled)
    monitor_argerror(L, "rate_us is for a monitor of mode \"sampled\"");
  if ((number = lua_type(L, -1) == LUA_TNUMBER))
    r = lua_tointegerx(L, -1, &isint);
  if (!isint || r < PM_RATE_MIN || r > PM_RATE_MAX) {
    const char *got =
        number ? luaL_tolstring(L, -1, NULL) : luaL_typename(L, -1);
    monitor_argerror(L, lua_pushfstring(L,
                                        "rate_us: an integer in [%d, %d] "
                                        "expected, got %s",
                                        PM_RATE_MIN, PM_RATE_MAX, got));
  }
  lua_pop(L, 1);
  return (uint32_t)r;
}

static void hooks_guard (lua_State *L, int shared); /* debug.sethook's */

/* core.open(probes) -> mask, rate_us: takes the probes the list names, for
** a monitor of probes.mode; rate_us is false for an exact one */
static int l_open (lua_State *L) {
  static const char *const fields[] = {"mode", "rate_us", NULL};
  pm_State *S = state(L);
  const char *err;
  lua_Integer i;
  unsigned mask = 0;
  uint32_t rate;
  if (!lua_istable(L, 1))
    monitor_argerror(L,
                     lua_pushfstring(L, "table of probe names expected, got %s",
                                     luaL_typename(L, 1)));
  for (i = 1; lua_geti(L, 1, i) != LUA_TNIL; i++) {
    int k = 0;
    size_t len;
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *s = lua_tolstring(L, -1, &len);
      while (probe_names[k] != NULL && (strlen(probe_names[k]) != len ||
                                        memcmp(s, probe_names[k], len) != 0))
        k++;
    }
    if (lua_type(L, -1) != LUA_TSTRING || probe_names[k] == NULL) {
      const char *name = push_quoted(L, -1);
      monitor_argerror(L, lua_pushfstring(L,
                                          "unknown probe %s at index %I "
                                          "(probes: %s)",
                                          name, i, probe_list(L)));
    }
    mask |= PM_BIT(k);
    lua_pop(L, 1);
  }
  check_fields(L, "perfmon.monitor", fields, i - 1);
  if (mask == 0)
    monitor_argerror(L, lua_pushfstring(L, "at least one probe expected (%s)",
                                        probe_list(L)));
  rate = check_rate(L, check_mode(L));
  /* it would charge every group nothing: refused, never a zero */
  if (rate != 0 && (mask & PM_BIT(PM_PROBE_MEMORY)))
    monitor_argerror(L, "probe \"memory\" needs mode \"exact\" (a sampled "
                        "monitor cannot tell each group's allocations)");
  if ((err = pm_monitor_open(L, S, mask, rate)) != NULL)
    return luaL_error(L, "perfmon: %s", err);
  hooks_guard(L, S->exact > 0);
  lua_pushinteger(L, mask);
  if (rate != 0)
    lua_pushinteger(L, rate);
  else
    lua_pushboolean(L, 0);
  return 2;
}

/* core.close(mask, rate_us), with what core.open returned */
static int l_close (lua_State *L) {
  pm_State *S = pm_state_get(L);
  unsigned mask = check_probes(L, 1);
  lua_Integer rate = lua_toboolean(L, 2) ? luaL_checkinteger(L, 2) : 0;
  luaL_argcheck(L, rate >= 0 && rate <= PM_RATE_MAX, 2, "not a rate_us");
  if (S != NULL && (rate != 0 ? S->nsampled : S->exact) > 0) {
    pm_monitor_close(L, S, mask, (uint32_t)rate);
    hooks_guard(L, S->exact > 0);
  }
  return 0;
}

/* }====================================================== */

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
  pm_State *S = state(L);
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

/* The tables are perfmon's own work, left out of every measure (they take
** milliseconds with thousands of groups): built protected, so that a
** memory error ends that too. */
static int snapshot_with (lua_State *L, lua_CFunction build) {
  pm_State *S = state(L);
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

/* core.fleet_publish(json, label): this state's entry on the process's
** board (fleet.h) holds json from now on */
static int l_fleet_publish (lua_State *L) {
  pm_State *S = state(L);
  size_t len;
  const char *json = luaL_checklstring(L, 1, &len);
  size_t llen;
  const char *label = luaL_checklstring(L, 2, &llen);
  if (strlen(label) != llen) /* fleet.lua says so first */
    arg_error(L, 2, "perfmon.fleet.publish", "the label holds a NUL byte");
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
  pm_State *S = state(L);
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
  pm_State *S = state(L);
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

/*
** {======================================================
** Event markers
** =======================================================
*/

/* The C API's markers, raising at the caller's position: these are called
** by the user.  A state closing (a finalizer run by lua_close) is not a
** misuse. */
static int marker (lua_State *L, int (*f)(lua_State *L), const char *misuse) {
  int rc = f(L);
  if (rc != PERFMON_OK) {
    luaL_where(L, 1);
    lua_pushstring(L, rc == PERFMON_EMISUSE ? misuse
                                            : "perfmon: the state is closing");
    lua_concat(L, 2);
    return lua_error(L);
  }
  return 0;
}

static int l_event_begin (lua_State *L) {
  return marker(L, perfmon_event_begin,
                "event_begin: an event is already open in this loop");
}

/* perfmon_event_end delivers the alerts once the event is over. */
static int l_event_end (lua_State *L) {
  return marker(L, perfmon_event_end, "event_end: no event is open");
}

static int l_nested_enter (lua_State *L) {
  return marker(L, perfmon_nested_enter, "nested_enter: too many nested loops");
}

static int l_nested_leave (lua_State *L) {
  return marker(L, perfmon_nested_leave,
                "nested_leave: no nested loop is open");
}

static int l_blocking_begin (lua_State *L) {
  return marker(L, perfmon_blocking_begin, "blocking_begin: cannot happen");
}

static int l_blocking_end (lua_State *L) {
  return marker(L, perfmon_blocking_end,
                "blocking_end: no blocking call is open");
}

/*
** Brackets: perfmon.event, nested_loop and blocking run fn(...) between a
** begin marker and its end.  The end is a to-be-closed value, so that Lua
** runs it however fn ends: a return, an error, a memory error,
** coroutine.close of a coroutine suspended inside (a pcall could fail to
** start for lack of memory and leave the bracket open for good).  Written
** in C because a host calls perfmon.event for every event, and the hook
** would see each Lua-level call a Lua version made.  Upvalue 1 of each is
** its ender, a table whose __close is the end marker.
*/

/* fn's results, above the ender (also the continuation after a yield) */
static int bracket_done (lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L) - 1;
}

/* Stack: fn args...  An event's and a nested loop's fn is the code of the
** new iteration: its calls into the caller's own groups start them
** (pm_hook_boundary), where a blocking call's runs on in its caller's. */
static int bracket (lua_State *L, const char *fname, int (*begin)(lua_State *),
                    int boundary) {
  if (lua_type(L, 1) != LUA_TFUNCTION) {
    if (luaL_getmetafield(L, 1, "__call") == LUA_TNIL)
      return luaL_error(L,
                        "bad argument #1 to '%s' (function expected, got %s)",
                        fname, luaL_typename(L, 1));
    lua_pop(L, 1);
  }
  /* a C function has LUA_MINSTACK free slots: room for the ender */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1); /* ender fn args... */
  if (boundary) /* before the marker's restart (pm_hook_restart) */
    pm_hook_boundary(L, pm_state_get(L));
  begin(L);
  lua_toclose(L, 1); /* nothing can fail between begin and here */
  lua_callk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, bracket_done);
  return bracket_done(L, LUA_OK, 0);
}

static int l_event (lua_State *L) {
  return bracket(L, "perfmon.event", l_event_begin, 1);
}

static int l_nested_loop (lua_State *L) {
  return bracket(L, "perfmon.nested_loop", l_nested_enter, 1);
}

static int l_blocking (lua_State *L) {
  return bracket(L, "perfmon.blocking", l_blocking_begin, 0);
}

/* Adds core[name], the bracket f whose end is the marker end. */
static void add_bracket (lua_State *L, const char *name, lua_CFunction f,
                         lua_CFunction end) {
  lua_newtable(L); /* core ender */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, end);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, name);
}

/* }====================================================== */

/*
** {======================================================
** Alerts (lua/perfmon/watcher.lua)
** =======================================================
*/

/* The bound of the watcher's thresholds and input window, in µs (1e15: 31
** years; the wall clock minus an input window stays exact in a double).
** It is exported as core.watch_max_us, which watcher.configure checks its
** settings against: what configure accepts, watch accepts. */
#define PM_WATCH_MAX_US 1e15

static double check_us (lua_State *L, int arg) {
  lua_Number v = luaL_checknumber(L, arg);
  luaL_argcheck(L, v >= 0 && v < PM_WATCH_MAX_US, arg,
                "must be a number of µs in [0, 1e15)");
  return (double)v;
}

/* core.watch(dispatcher, jank_us, blocking_us, input_window_us
** [, inclusive]): jank on self time, or on inclusive time when inclusive
** is true; core.watch(nil) stops detecting alerts. */
static int l_watch (lua_State *L) {
  pm_State *S = state(L);
  if (lua_isnil(L, 1)) {
    pm_alert_watch(L, S, 1, 0, 0, 0, 0);
    return 0;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  pm_alert_watch(L, S, 1, check_us(L, 2), check_us(L, 3), check_us(L, 4),
                 lua_toboolean(L, 5));
  return 0;
}

/* core.alerts() -> { {source = ..., details = ...}, ... } */
static int l_alerts (lua_State *L) {
  pm_alert_take(L, state(L));
  return 1;
}

/* core.deliver() -> ms until the dispatcher wants its next call, or nil
** when nothing waits: calls the dispatcher now, unless inside an event */
static int l_deliver (lua_State *L) {
  pm_State *S = state(L);
  double next_ms;
  pm_hook_settle(L, S);
  next_ms = pm_alert_poll(L, S);
  if (next_ms < 0)
    lua_pushnil(L);
  else
    lua_pushnumber(L, next_ms);
  return 1;
}

static int l_user_input (lua_State *L) {
  pm_alert_input(&state(L)->e);
  return 0;
}

static int l_animation (lua_State *L) {
  check_type(L, 1, "perfmon.animation", LUA_TBOOLEAN);
  pm_alert_animation(&state(L)->e, lua_toboolean(L, 1));
  return 0;
}

/* core.owns_hook([thread]) -> whether the thread's debug hook is perfmon's
** (debug.gethook says "external hook" for it) */
static int l_owns_hook (lua_State *L) {
  lua_State *co = lua_isnoneornil(L, 1) ? L : lua_tothread(L, 1);
  luaL_argexpected(L, co != NULL, 1, "thread");
  lua_pushboolean(L, pm_hook_owns(state(L), co));
  return 1;
}

/*
** {======================================================
** debug.sethook and debug.gethook while monitors are open
** =======================================================
*/

/* The debug library's table of Lua hooks by thread, as ldblib.c keeps it
** (pushed; made as ldblib.c makes it when absent). */
static void hook_table (lua_State *L) {
  if (!luaL_getsubtable(L, LUA_REGISTRYINDEX, "_HOOKKEY")) {
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_pushvalue(L, -1);
    lua_setmetatable(L, -2);
  }
}

/* Pushes co onto L's stack. */
static void push_thread (lua_State *L, lua_State *co) {
  if (co == L) {
    lua_pushthread(L);
  } else {
    luaL_checkstack(co, 1, "debug.sethook");
    lua_pushthread(co);
    lua_xmove(co, L, 1);
  }
}

/* The thread argument, which is optional (ldblib.c's getthread). */
static lua_State *hook_thread (lua_State *L, int *arg) {
  if (lua_isthread(L, 1)) {
    *arg = 1;
    return lua_tothread(L, 1);
  }
  *arg = 0;
  return L;
}

/* Calls upvalue i with the arguments; returns its results. */
static int call_raw (lua_State *L, int i) {
  lua_pushvalue(L, lua_upvalueindex(i));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* debug.sethook([thread,] hook, mask [, count]), as ldblib.c's, but the
** hook is chained behind perfmon's while monitors are open; upvalues: the
** debug library's sethook and gethook. */
static int hooks_set (lua_State *L) {
  pm_State *S = state(L);
  int arg, mask = 0, count = 0;
  lua_State *co = hook_thread(L, &arg);
  if (S->exact == 0)
    return call_raw(L, 1);
  if (S->debug_hook == NULL)
    return luaL_error(L, "debug.sethook: perfmon is monitoring this Lua "
                         "state and cannot share its hook with this debug "
                         "library; close the monitors first");
  if (lua_isnoneornil(L, arg + 1)) {
    lua_settop(L, arg + 1);
  } else {
    const char *smask = luaL_checkstring(L, arg + 2);
    luaL_checktype(L, arg + 1, LUA_TFUNCTION);
    count = (int)luaL_optinteger(L, arg + 3, 0);
    mask = (strchr(smask, 'c') ? LUA_MASKCALL : 0) |
           (strchr(smask, 'r') ? LUA_MASKRET : 0) |
           (strchr(smask, 'l') ? LUA_MASKLINE : 0) |
           (count > 0 ? LUA_MASKCOUNT : 0);
  }
  hook_table(L);
  push_thread(L, co);
  lua_pushvalue(L, arg + 1);
  lua_rawset(L, -3);
  if (!pm_hook_chain(S, co, S->debug_hook, mask, count))
    nomem(L);
  return 0;
}

/* debug.gethook([thread]): the program's hook, never perfmon's. */
static int hooks_get (lua_State *L) {
  pm_State *S = state(L);
  int arg, mask, count, n = 0;
  lua_State *co = hook_thread(L, &arg);
  char smask[4];
  lua_Hook h;
  if (S->exact == 0 || !pm_hook_owns(S, co))
    return call_raw(L, 2);
  if ((h = pm_hook_chained(S, co, &mask, &count)) == NULL) {
    luaL_pushfail(L);
    return 1;
  }
  if (h != S->debug_hook) {
    lua_pushliteral(L, "external hook");
  } else {
    hook_table(L);
    push_thread(L, co);
    lua_rawget(L, -2);
    lua_remove(L, -2);
  }
  if (mask & LUA_MASKCALL)
    smask[n++] = 'c';
  if (mask & LUA_MASKRET)
    smask[n++] = 'r';
  if (mask & LUA_MASKLINE)
    smask[n++] = 'l';
  lua_pushlstring(L, smask, (size_t)n);
  lua_pushinteger(L, count);
  return 3;
}

static int noop (lua_State *L) {
  (void)L;
  return 0;
}

/* The registry's record of the debug library: the library, its sethook and
** gethook, the two that share the hook, and the two fields' names. */
static const char hooks_key = 0;
enum { HOOKS_LIB = 1, HOOKS_RAW = 2, HOOKS_SHARED = 4, HOOKS_NAME = 6 };

/* debug.sethook and debug.gethook: the shared two while exact monitors are
** open (shared), the debug library's own otherwise; two that a program
** put there stay.  Called where the count of exact monitors changes, and
** it neither allocates nor calls: a monitor closed deep in an error's
** handling, where no call can be made any more, still sets them right. */
static void hooks_guard (lua_State *L, int shared) {
  int from = shared ? HOOKS_RAW : HOOKS_SHARED;
  int to = shared ? HOOKS_SHARED : HOOKS_RAW, i;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hooks_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return; /* no debug library */
  }
  lua_rawgeti(L, -1, HOOKS_LIB); /* t lib */
  lua_rawgeti(L, -2, HOOKS_NAME);
  lua_rawget(L, -2); /* t lib lib.sethook */
  lua_rawgeti(L, -3, from); /* t lib lib.sethook from */
  if (lua_rawequal(L, -1, -2))
    for (i = 0; i < 2; i++) {
      lua_rawgeti(L, -4, HOOKS_NAME + i);
      lua_rawgeti(L, -5, to + i);
      lua_rawset(L, -5); /* an existing field: no allocation */
    }
  lua_pop(L, 4);
}

/* core.hook_functions(debug): from now on the debug library's sethook and
** gethook give way to two that share the hook while exact monitors are
** open (hooks_guard).  Once a state: perfmon required again (a host that
** reloads its modules) may find the shared two in the library, which are
** not its own.  Learns the debug library's hook (a Lua hook set on a
** thread that is not running, which sees no event), if its table is where
** ldblib.c keeps it. */
static int l_hook_functions (lua_State *L) {
  pm_State *S = state(L);
  lua_State *co;
  lua_Hook h;
  int i;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_createtable(L, HOOKS_NAME + 1, 0); /* 2: the record */
  lua_pushvalue(L, 1);
  lua_rawseti(L, 2, HOOKS_LIB);
  lua_pushliteral(L, "sethook");
  lua_rawseti(L, 2, HOOKS_NAME);
  lua_pushliteral(L, "gethook");
  lua_rawseti(L, 2, HOOKS_NAME + 1);
  for (i = 0; i < 2; i++) {
    lua_rawgeti(L, 2, HOOKS_NAME + i);
    if (lua_rawget(L, 1) != LUA_TFUNCTION)
      luaL_argerror(L, 1,
                    i == 0 ? "no function sethook in it"
                           : "no function gethook in it");
    lua_rawseti(L, 2, HOOKS_RAW + i);
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hooks_key) == LUA_TTABLE)
    return 0;
  lua_pop(L, 1);
  co = lua_newthread(L); /* 3 */
  lua_rawgeti(L, 2, HOOKS_RAW);
  lua_pushvalue(L, 3);
  lua_pushcfunction(L, noop);
  lua_pushliteral(L, "c");
  lua_call(L, 3, 0);
  h = lua_gethook(co);
  hook_table(L);
  lua_pushvalue(L, 3);
  lua_rawget(L, -2);
  S->debug_hook = lua_tocfunction(L, -1) == noop ? h : NULL;
  lua_pop(L, 2);
  lua_rawgeti(L, 2, HOOKS_RAW);
  lua_pushvalue(L, 3);
  lua_call(L, 1, 0); /* the thread's hook and its table entry go */
  for (i = 0; i < 2; i++) {
    lua_rawgeti(L, 2, HOOKS_RAW);
    lua_rawgeti(L, 2, HOOKS_RAW + 1);
    lua_pushcclosure(L, i == 0 ? hooks_set : hooks_get, 2);
    lua_rawseti(L, 2, HOOKS_SHARED + i);
  }
  lua_pushvalue(L, 2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &hooks_key);
  hooks_guard(L, S->exact > 0);
  return 0;
}

/* }====================================================== */

/* core.wall_us() -> the monotonic clock the watcher's delays use */
static int l_wall_us (lua_State *L) {
  lua_pushnumber(L, pm_wall_us());
  return 1;
}

/* }====================================================== */

static const luaL_Reg core_funcs[] = {{"group", l_group},
                                      {"is_group", l_is_group},
                                      {"attach", l_attach},
                                      {"detach", l_detach},
                                      {"attach_source", l_attach_source},
                                      {"detach_source", l_detach_source},
                                      {"chunk", l_chunk},
                                      {"open", l_open},
                                      {"close", l_close},
                                      {"stats", l_stats},
                                      {"times", l_times},
                                      {"info", l_info},
                                      {"counts", l_counts},
                                      {"fleet_publish", l_fleet_publish},
                                      {"fleet_entries", l_fleet_entries},
                                      {"event_begin", l_event_begin},
                                      {"event_end", l_event_end},
                                      {"nested_enter", l_nested_enter},
                                      {"nested_leave", l_nested_leave},
                                      {"blocking_begin", l_blocking_begin},
                                      {"blocking_end", l_blocking_end},
                                      {"watch", l_watch},
                                      {"alerts", l_alerts},
                                      {"deliver", l_deliver},
                                      {"user_input", l_user_input},
                                      {"animation", l_animation},
                                      {"wall_us", l_wall_us},
                                      {"owns_hook", l_owns_hook},
                                      {"hook_functions", l_hook_functions},
                                      {NULL, NULL}};

static const luaL_Reg group_meta[] = {{"__index", group_index},
                                      {"__tostring", group_tostring},
                                      {"__gc", group_gc},
                                      {NULL, NULL}};

/*
** {======================================================
** The state: opened by the first require, closed by lua_close
** =======================================================
*/

/* lua_close: finalizers run before any memory is freed, so perfmon lets go
** of everything here and hands the allocator back before the sweep. */
static int state_close (lua_State *L) {
  pm_State *S = lua_touserdata(L, 1);
  if (S->closed)
    return 0;
  if (S->profiler != NULL) /* one whose __gc ran and that was restarted */
    pm_profiler_stop(L, S->profiler, 0, PM_PROF_STOPPED);
  pm_hook_close(S);
  hooks_guard(L, 0);
  if (S->fleet_id != 0)
    pm_fleet_close(S->fleet_id); /* its last totals stay on the board */
  pm_groups_free(&S->e);
  pm_watch_close(L, S);
  S->closed = 1;
  return 0;
}

static void state_open (lua_State *L) {
  pm_State *S = pm_state_get(L);
  int watched;
  if (S != NULL)
    return;
  S = pm_state_new(L, state_close);
  pm_hook_choose(L, S);
  S->brackets[0] = l_event;
  S->brackets[1] = l_nested_loop;
  watched = pm_watch_open(L, S);
  if (watched < 0)
    luaL_error(L, "not enough memory");
  if (watched == 0) {
    luaL_error(L, "perfmon: this Lua's allocator does not free objects at "
                  "the addresses lua_topointer gives; attribution could not "
                  "be kept safe across garbage collection");
  }
  pm_state_ready(L, S);
}

/* }====================================================== */

LUAMOD_API int luaopen_perfmon_core (lua_State *L) {
  state_open(L);
  if (luaL_newmetatable(L, GROUP_MT))
    luaL_setfuncs(L, group_meta, 0);
  lua_pop(L, 1);
  luaL_newlib(L, core_funcs);
  lua_pushnumber(L, PM_WATCH_MAX_US);
  lua_setfield(L, -2, "watch_max_us");
  lua_pushinteger(L, PM_RATE_MIN);
  lua_setfield(L, -2, "rate_min_us");
  lua_pushinteger(L, PM_RATE_MAX);
  lua_setfield(L, -2, "rate_max_us");
  add_bracket(L, "event", l_event, l_event_end);
  add_bracket(L, "nested_loop", l_nested_loop, l_nested_leave);
  add_bracket(L, "blocking", l_blocking, l_blocking_end);
  pm_profiler_register(L); /* core.profiler_* */
  pm_upvalues_register(L); /* core.upvalue_functions */
  return 1;
}
