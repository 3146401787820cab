/*
** editor_host.c -- perfmon-editor, the editor demo's host written in C.
**
** The same host as examples/editor/editor.lua, for programs whose event
** loop is in C: it embeds Lua and perfmon, loads every plugin of
** examples/editor/plugins into a sandbox of its own (luaL_loadfilex with an
** environment table) and a performance group of its own (perfmon.group and
** perfmon.attach, called from C), replays examples/editor/session.lua
** through an event loop written in C, prints the plugin watcher's warnings
** as they come, and ends with the same about:performance-style table.
**
**   perfmon-editor [ROOT]      ROOT: the repository (default: .)
**
** What goes through perfmon's C API (src/perfmon.h):
**   perfmon_event_begin/end     around each input: one event per keystroke,
**                               cursor move or save (perfmon_event_end also
**                               delivers the watcher's alerts);
**   perfmon_user_input          at each input: jank right after it is
**                               visible to the user;
**   perfmon_blocking_begin/end  around the disk writes: the document on
**                               save, and editor.backup(), a write to a slow
**                               remote store (~100 ms) that a plugin calls.
** Everything else is Lua's API: require("perfmon"), the groups, the
** monitor and its snapshots, require("perfmon.plugin_watcher").
**
** The plugins see the `editor` table documented in examples/editor/
** editor.lua; here its functions are C closures.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "perfmon.h"
#include "snapshot.h"

#define MAX_PLUGINS 32
#define BACKUP_LATENCY_MS 100
typedef SnapStats Stats;

typedef struct Plugin {
  char name[64]; /* its file's name without .lua, and its group's */
  int id; /* its group's id */
  int handlers_ref; /* registry: { key = {fn...}, cursor = {...}, save = {...} } */
  char status[128]; /* its part of the status bar */
  /* what the host measures around each call (thread CPU clock) */
  double cpu_us;
  long calls, errors, backups;
  Stats pm;
} Plugin;

enum { KEY, CURSOR, SAVE };
static const char *const kinds[] = {"key", "cursor", "save"};

typedef struct Input {
  int kind;
  char key; /* KEY: a character, '\n' or '\b' */
  int line, col; /* CURSOR */
} Input;

static struct {
  const char *root;
  char path[64]; /* where saves go: a temporary file */
  Plugin plugins[MAX_PLUGINS];
  int nplugins;
  Input *inputs;
  int ninputs, ncounts[3];
  const char *when; /* "input 3/53": when a warning arrives */
  char when_buf[32];
  int saves;
  int perfmon_ref, watcher_ref, pw_ref, monitor_ref, before_ref;
  long long time_us; /* the session's wall time, from the snapshots */
  Stats process;
} H = {.when = "start"};

/* The document: lines without their newlines, and the cursor. */
static struct {
  char **lines;
  int n, cap;
  int line, col; /* 1-based; col is a byte column */
} B;

static void die (const char *what, const char *msg) {
  fflush(stdout);
  fprintf(stderr, "perfmon-editor: %s: %s\n", what, msg);
  exit(EXIT_FAILURE);
}

static double clock_us (clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_ms (long ms) {
  struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
  while (nanosleep(&req, &rem) != 0 && errno == EINTR)
    req = rem;
}

/* A perfmon_* call that fails is a bug in this host: stop. */
static void pm_check (int rc, const char *call) {
  if (rc != PERFMON_OK) {
    char msg[512];
    snprintf(msg, sizeof(msg), "returned %d: %s", rc, perfmon_strerror(rc));
    die(call, msg);
  }
}

#define PM(call) pm_check((call), #call)

/*
** {======================================================
** The buffer
** =======================================================
*/

static char *dup_range (const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL)
    die("malloc", "not enough memory");
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* Makes room for line `at` (0-based), shifting the ones after it. */
static void insert_line (int at, char *text) {
  if (B.n == B.cap) {
    int cap = B.cap ? 2 * B.cap : 16;
    char **lines = realloc(B.lines, (size_t)cap * sizeof(char *));
    if (lines == NULL)
      die("realloc", "not enough memory");
    B.lines = lines;
    B.cap = cap;
  }
  memmove(B.lines + at + 1, B.lines + at, (size_t)(B.n - at) * sizeof(char *));
  B.lines[at] = text;
  B.n++;
}

static void remove_line (int at) {
  free(B.lines[at]);
  memmove(B.lines + at, B.lines + at + 1,
          (size_t)(B.n - at - 1) * sizeof(char *));
  B.n--;
}

static void buffer_insert (char key) {
  char *line = B.lines[B.line - 1];
  size_t len = strlen(line), at = (size_t)B.col - 1;
  if (key == '\n') {
    insert_line(B.line, dup_range(line + at, len - at));
    line[at] = '\0';
    B.line++;
    B.col = 1;
  } else if (key == '\b') {
    if (B.col > 1) {
      memmove(line + at - 1, line + at, len - at + 1);
      B.col--;
    } else if (B.line > 1) { /* joins the line to the previous one */
      char *prev = B.lines[B.line - 2];
      size_t plen = strlen(prev);
      char *joined = malloc(plen + len + 1);
      if (joined == NULL)
        die("malloc", "not enough memory");
      memcpy(joined, prev, plen);
      memcpy(joined + plen, line, len + 1);
      free(prev);
      B.lines[B.line - 2] = joined;
      remove_line(B.line - 1);
      B.line--;
      B.col = (int)plen + 1;
    }
  } else {
    char *grown = realloc(line, len + 2);
    if (grown == NULL)
      die("realloc", "not enough memory");
    memmove(grown + at + 1, grown + at, len - at + 1);
    grown[at] = key;
    B.lines[B.line - 1] = grown;
    B.col++;
  }
}

/* Like a real editor, a move past the end of a line or of the document
** stops at it. */
static void buffer_move (int line, int col) {
  int len;
  B.line = line < 1 ? 1 : line > B.n ? B.n : line;
  len = (int)strlen(B.lines[B.line - 1]);
  B.col = col < 1 ? 1 : col > len + 1 ? len + 1 : col;
}

/* ... -> ... text */
static void push_text (lua_State *L) {
  luaL_Buffer b;
  int i;
  luaL_buffinit(L, &b);
  for (i = 0; i < B.n; i++) {
    if (i > 0)
      luaL_addchar(&b, '\n');
    luaL_addstring(&b, B.lines[i]);
  }
  luaL_pushresult(&b);
}

static void buffer_free (void) {
  while (B.n > 0)
    free(B.lines[--B.n]);
  free(B.lines);
}

/* }====================================================== */

/*
** {======================================================
** The `editor` table: C closures, upvalue 1 is the plugin
** =======================================================
*/

static Plugin *plugin_of (lua_State *L) {
  return (Plugin *)lua_touserdata(L, lua_upvalueindex(1));
}

/* editor.on_key/on_cursor/on_save(fn); upvalue 2 is the kind */
static int api_on (lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_rawgeti(L, LUA_REGISTRYINDEX, plugin_of(L)->handlers_ref);
  lua_getfield(L, -1, lua_tostring(L, lua_upvalueindex(2)));
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

static int api_text (lua_State *L) {
  push_text(L);
  return 1;
}

static int api_line (lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n >= 1 && n <= B.n)
    lua_pushstring(L, B.lines[n - 1]);
  else
    lua_pushnil(L);
  return 1;
}

static int api_cursor (lua_State *L) {
  lua_pushinteger(L, B.line);
  lua_pushinteger(L, B.col);
  return 2;
}

static int api_status (lua_State *L) {
  Plugin *p = plugin_of(L);
  snprintf(p->status, sizeof(p->status), "%s", luaL_checkstring(L, 1));
  return 0;
}

/* Writes the text to path, inside a blocking call declared to perfmon;
** delay_ms is the storage's latency.  False when the file could not be
** written. */
static int write_file (lua_State *L, const char *path, const char *text,
                       size_t len, long delay_ms) {
  FILE *f;
  int ok;
  PM(perfmon_blocking_begin(L));
  f = fopen(path, "w");
  ok = f != NULL && fwrite(text, 1, len, f) == len;
  if (f != NULL)
    ok &= fclose(f) == 0;
  if (delay_ms > 0)
    sleep_ms(delay_ms);
  PM(perfmon_blocking_end(L));
  return ok;
}

/* editor.backup(text): a synchronous write to a slow remote store */
static int api_backup (lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  char path[sizeof(H.path) + 4];
  snprintf(path, sizeof(path), "%s.bak", H.path);
  if (!write_file(L, path, text, len, BACKUP_LATENCY_MS))
    return luaL_error(L, "backup: cannot write %s", path);
  plugin_of(L)->backups++;
  return 0;
}

/* ... -> ... editor */
static void push_api (lua_State *L, Plugin *p) {
  static const luaL_Reg funcs[] = {
      {"text", api_text},     {"line", api_line},     {"cursor", api_cursor},
      {"status", api_status}, {"backup", api_backup}, {NULL, NULL}};
  int k;
  lua_newtable(L);
  lua_pushlightuserdata(L, p);
  luaL_setfuncs(L, funcs, 1);
  for (k = KEY; k <= SAVE; k++) {
    char name[16];
    snprintf(name, sizeof(name), "on_%s", kinds[k]);
    lua_pushlightuserdata(L, p);
    lua_pushstring(L, kinds[k]);
    lua_pushcclosure(L, api_on, 2);
    lua_setfield(L, -2, name);
  }
}

/* }====================================================== */

/*
** {======================================================
** Plugins: sandboxes and groups
** =======================================================
*/

/* ... -> ... copy, a shallow copy of global table `name` */
static void push_copy (lua_State *L, const char *name) {
  lua_newtable(L);
  lua_getglobal(L, name);
  lua_pushnil(L);
  while (lua_next(L, -2)) { /* ... copy lib key value */
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -5);
  }
  lua_pop(L, 1);
}

/* ... -> ... env: the sandbox of plugin p, as editor.lua makes it */
static void push_sandbox (lua_State *L, Plugin *p) {
  static const char *const libs[] = {"string", "table",     "math",
                                     "utf8",   "coroutine", NULL};
  static const char *const basics[] = {
      "assert",       "error",    "ipairs",   "next",
      "pairs",        "pcall",    "rawequal", "rawget",
      "rawlen",       "rawset",   "select",   "setmetatable",
      "getmetatable", "tonumber", "tostring", "type",
      "xpcall",       NULL};
  static const char *const os_funcs[] = {"clock", "time", "date", NULL};
  int i;
  lua_newtable(L);
  for (i = 0; libs[i] != NULL; i++) {
    push_copy(L, libs[i]);
    lua_setfield(L, -2, libs[i]);
  }
  for (i = 0; basics[i] != NULL; i++) {
    lua_getglobal(L, basics[i]);
    lua_setfield(L, -2, basics[i]);
  }
  lua_newtable(L);
  lua_getglobal(L, "os");
  for (i = 0; os_funcs[i] != NULL; i++) {
    lua_getfield(L, -1, os_funcs[i]);
    lua_setfield(L, -3, os_funcs[i]);
  }
  lua_pop(L, 1);
  lua_setfield(L, -2, "os");
  push_api(L, p);
  lua_setfield(L, -2, "editor");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "_G");
}

/* Calls perfmon.<fname> with the nargs values on the top; nres results. */
static void call_perfmon (lua_State *L, const char *fname, int nargs,
                          int nres) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H.perfmon_ref);
  lua_getfield(L, -1, fname);
  lua_remove(L, -2);
  lua_insert(L, -nargs - 1);
  lua_call(L, nargs, nres);
}

/* Loads plugin file `path` into a sandbox of its own and a group of its
** own, and runs its main chunk.  False (the error on the stack) when it
** fails. */
static int load_plugin (lua_State *L, Plugin *p, const char *path) {
  int k, env, group;
  /* group = perfmon.group{ name = p->name, kind = "plugin" } */
  lua_createtable(L, 0, 2);
  lua_pushstring(L, p->name);
  lua_setfield(L, -2, "name");
  lua_pushliteral(L, "plugin");
  lua_setfield(L, -2, "kind");
  call_perfmon(L, "group", 1, 1);
  group = lua_gettop(L);
  lua_getfield(L, group, "id");
  p->id = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_createtable(L, 0, 3); /* group handlers */
  for (k = KEY; k <= SAVE; k++) {
    lua_newtable(L);
    lua_setfield(L, -2, kinds[k]);
  }
  p->handlers_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  push_sandbox(L, p);
  env = lua_gettop(L);
  /* perfmon.attach(env, group): every function whose environment is env
     belongs to the group.  The monitor is already open, so the chunk's
     functions that touch no global are resolved when its main runs. */
  lua_pushvalue(L, env);
  lua_pushvalue(L, group);
  call_perfmon(L, "attach", 2, 0);
  if (luaL_loadfilex(L, path, "t") != LUA_OK)
    goto failed;
  lua_pushvalue(L, env); /* group env main env */
  lua_setupvalue(L, -2, 1); /* _ENV: the sandbox */
  if (lua_pcall(L, 0, 0, 0) != LUA_OK)
    goto failed;
  lua_settop(L, group - 1);
  return 1;
failed: /* group env message */
  lua_replace(L, group);
  lua_settop(L, group);
  return 0;
}

static int by_name (const void *a, const void *b) {
  return strcmp(((const Plugin *)a)->name, ((const Plugin *)b)->name);
}

/* Loads every *.lua file of the plugins folder, in name order; a plugin
** that fails to load is reported and left out. */
static void load_plugins (lua_State *L) {
  char dir[4096], path[8192];
  struct dirent *de;
  DIR *d;
  int i, n = 0;
  snprintf(dir, sizeof(dir), "%s/examples/editor/plugins", H.root);
  if ((d = opendir(dir)) == NULL)
    luaL_error(L, "cannot open %s: %s", dir, strerror(errno));
  while ((de = readdir(d)) != NULL && n < MAX_PLUGINS) {
    size_t len = strlen(de->d_name);
    if (len > 4 && len - 4 < sizeof(H.plugins[n].name) &&
        strcmp(de->d_name + len - 4, ".lua") == 0) {
      memcpy(H.plugins[n].name, de->d_name, len - 4);
      H.plugins[n++].name[len - 4] = '\0';
    }
  }
  closedir(d);
  qsort(H.plugins, (size_t)n, sizeof(Plugin), by_name);
  for (i = 0; i < n; i++) {
    Plugin *p = &H.plugins[H.nplugins];
    if (p != &H.plugins[i])
      *p = H.plugins[i];
    snprintf(path, sizeof(path), "%s/%s.lua", dir, p->name);
    if (load_plugin(L, p, path))
      H.nplugins++;
    else {
      printf("editor: plugin %s not loaded: %s\n", p->name,
             lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  if (H.nplugins == 0)
    luaL_error(L, "no plugins in %s", dir);
}

/* }====================================================== */

/*
** {======================================================
** The session
** =======================================================
*/

static void add_input (lua_State *L, Input in) {
  Input *grown = realloc(H.inputs, (size_t)(H.ninputs + 1) * sizeof(Input));
  if (grown == NULL)
    luaL_error(L, "not enough memory");
  H.inputs = grown;
  H.inputs[H.ninputs++] = in;
  H.ncounts[in.kind]++;
}

/* Reads examples/editor/session.lua into H.inputs, one input per event. */
static void load_session (lua_State *L) {
  lua_Integer i, n;
  lua_pushfstring(L, "%s/examples/editor/session.lua", H.root);
  if (luaL_dofile(L, lua_tostring(L, -1)) != LUA_OK)
    lua_error(L);
  luaL_checktype(L, -1, LUA_TTABLE);
  n = luaL_len(L, -1);
  for (i = 1; i <= n; i++) { /* ... steps */
    const char *what;
    size_t len, k;
    int isline, iscol;
    Input in = {0, 0, 0, 0};
    lua_geti(L, -1, i);
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    lua_geti(L, -3, 3); /* ... steps step what arg2 arg3 */
    what = lua_tostring(L, -3);
    what = what != NULL ? what : "?";
    if (strcmp(what, "type") == 0 && lua_type(L, -2) == LUA_TSTRING) {
      const char *text = lua_tolstring(L, -2, &len);
      for (k = 0; k < len; k++)
        add_input(L, (Input){KEY, text[k], 0, 0});
    } else if (strcmp(what, "key") == 0 && lua_type(L, -2) == LUA_TSTRING &&
               lua_rawlen(L, -2) == 1) {
      add_input(L, (Input){KEY, lua_tostring(L, -2)[0], 0, 0});
    } else if (strcmp(what, "move") == 0) {
      in.kind = CURSOR;
      in.line = (int)lua_tointegerx(L, -2, &isline);
      in.col = (int)lua_tointegerx(L, -1, &iscol);
      if (!isline || !iscol)
        luaL_error(L, "session step %d: move expects line, col", (int)i);
      add_input(L, in);
    } else if (strcmp(what, "save") == 0) {
      add_input(L, (Input){SAVE, 0, 0, 0});
    } else
      luaL_error(L, "session step %d: unknown step \"%s\"", (int)i, what);
    lua_pop(L, 4);
  }
  lua_pop(L, 2);
}

/* }====================================================== */

/*
** {======================================================
** The event loop
** =======================================================
*/

/* Calls the handlers of one kind, each plugin's in protected mode (a
** failing plugin never takes the editor down), with the nargs values on
** the top as arguments, and measures each call. */
static void notify (lua_State *L, int kind, int nargs) {
  int base = lua_gettop(L) - nargs, i, j, k, n;
  for (i = 0; i < H.nplugins; i++) {
    Plugin *p = &H.plugins[i];
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->handlers_ref);
    lua_getfield(L, -1, kinds[kind]); /* args handlers list */
    n = (int)lua_rawlen(L, -1);
    for (j = 1; j <= n; j++) {
      double t0;
      lua_rawgeti(L, -1, j);
      for (k = 1; k <= nargs; k++)
        lua_pushvalue(L, base + k);
      t0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
      if (lua_pcall(L, nargs, 0, 0) != LUA_OK) {
        p->errors++;
        printf("editor: plugin %s failed: %s\n", p->name,
               lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
        lua_pop(L, 1);
      }
      p->cpu_us += clock_us(CLOCK_THREAD_CPUTIME_ID) - t0;
      p->calls++;
    }
    lua_pop(L, 2);
  }
  lua_settop(L, base);
}

/* The document goes to the local disk: quick, but a disk write all the
** same, charged to the process (no plugin runs). */
static void save (lua_State *L) {
  push_text(L);
  lua_pushliteral(L, "\n");
  lua_concat(L, 2);
  if (!write_file(L, H.path, lua_tostring(L, -1), lua_rawlen(L, -1), 0))
    luaL_error(L, "cannot save %s", H.path);
  lua_pop(L, 1);
  H.saves++;
}

/* One iteration of the loop: the input, then the plugins' handlers. */
static void handle (lua_State *L, const Input *in) {
  PM(perfmon_user_input(L));
  switch (in->kind) {
    case KEY:
      buffer_insert(in->key);
      lua_pushlstring(L, &in->key, 1);
      notify(L, KEY, 1);
      break;
    case CURSOR:
      buffer_move(in->line, in->col);
      lua_pushinteger(L, B.line);
      lua_pushinteger(L, B.col);
      notify(L, CURSOR, 2);
      break;
    default:
      save(L);
      lua_pushstring(L, H.path);
      notify(L, SAVE, 1);
  }
}

static int replay (lua_State *L) {
  int i;
  snap_call_method(L, H.monitor_ref, "snapshot");
  H.before_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  for (i = 0; i < H.ninputs; i++) {
    snprintf(H.when_buf, sizeof(H.when_buf), "input %d/%d", i + 1, H.ninputs);
    H.when = H.when_buf;
    PM(perfmon_event_begin(L));
    handle(L, &H.inputs[i]);
    PM(perfmon_event_end(L));
    PM(perfmon_poll(L, NULL)); /* the idle step */
  }
  /* the end of the session: alerts raised by the last events may still be
     buffered; deliver them now (watcher.flush()), so that none is lost */
  H.when = "after the session";
  lua_rawgeti(L, LUA_REGISTRYINDEX, H.watcher_ref);
  lua_getfield(L, -1, "flush");
  lua_call(L, 0, 0);
  lua_pop(L, 1);
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** Setup: perfmon, the monitor, the plugin watcher
** =======================================================
*/

/* on_warning(w): prints w.message */
static int on_warning (lua_State *L) {
  lua_getfield(L, 1, "message");
  printf("[%s] perfmon: %s\n", H.when, luaL_optstring(L, -1, "(no message)"));
  fflush(stdout);
  return 0;
}

/* ... -> ... require(name) */
static void push_require (lua_State *L, const char *name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
}

static int setup (lua_State *L) {
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
  push_require(L, "perfmon");
  H.perfmon_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  push_require(L, "perfmon.watcher");
  H.watcher_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* mon = perfmon.monitor{ "jank", "blocking", "ticks", "memory" }, opened
     before the plugins' main chunks run, so that they are measured too */
  lua_createtable(L, 4, 0);
  lua_pushliteral(L, "jank");
  lua_rawseti(L, -2, 1);
  lua_pushliteral(L, "blocking");
  lua_rawseti(L, -2, 2);
  lua_pushliteral(L, "ticks");
  lua_rawseti(L, -2, 3);
  lua_pushliteral(L, "memory");
  lua_rawseti(L, -2, 4);
  call_perfmon(L, "monitor", 1, 1);
  H.monitor_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* pw = require("perfmon.plugin_watcher").new{ on_warning = on_warning } */
  push_require(L, "perfmon.plugin_watcher");
  lua_getfield(L, -1, "new");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, on_warning);
  lua_setfield(L, -2, "on_warning");
  lua_call(L, 1, 1);
  H.pw_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);

  load_plugins(L);
  load_session(L);
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** The report: d = mon:snapshot():subtract(before)
** =======================================================
*/

static int report (lua_State *L) {
  int d, i;
  d = snap_since(L, H.monitor_ref, H.before_ref);
  H.time_us = snap_int_field(L, d, "time");
  lua_getfield(L, d, "process");
  snap_read_stats(L, &H.process);
  lua_getfield(L, d, "groups");
  for (i = 0; i < H.nplugins; i++)
    snap_read_group(L, H.plugins[i].id, &H.plugins[i].pm);
  lua_settop(L, d - 2);
  /* pw:close(); mon:close() */
  snap_call_method(L, H.pw_ref, "close");
  snap_call_method(L, H.monitor_ref, "close");
  lua_pop(L, 2);
  return 0;
}

/* A histogram as "lo-hi:n" pairs: durations[k] counts the events in which
** the group ran >= 2^(k-1) ms; each bucket [2^(k-1), 2^k) ms is shown on
** its own, so the counts add up to the events. */
static const char *histogram (const Stats *st, char *buf, size_t size) {
  size_t len = 0;
  int k;
  buf[0] = '\0';
  for (k = 0; k < NDURATIONS; k++) {
    long long n =
        st->durations[k] - (k + 1 < NDURATIONS ? st->durations[k + 1] : 0);
    if (n > 0 && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%d-%d:%lld",
                              len > 0 ? " " : "", 1 << k, 2 << k, n);
  }
  return len > 0 ? buf : "-";
}

static const char *longest (const Stats *st, char *buf, size_t size) {
  if (st->longest == 0)
    return "<1 ms";
  snprintf(buf, size, "%d-%d ms", 1 << (st->longest - 1), 1 << st->longest);
  return buf;
}

/* share: st's percent of the process's CPU time */
static void print_row (const Stats *st) {
  char hist[256], lng[32];
  double total = H.process.cpu_us > 0 ? (double)H.process.cpu_us : 1;
  printf("%-16s %9.1f %6.1f%% %6lld %11.1f %9.1f  %-10s %s\n", st->name,
         (double)st->cpu_us / 1000, 100 * (double)st->cpu_us / total, st->ticks,
         (double)st->blocking_us / 1000, (double)st->alloc_bytes / 1024,
         longest(st, lng, sizeof(lng)), histogram(st, hist, sizeof(hist)));
}

/* Busiest first; ties by name. */
static int by_cpu (const void *a, const void *b) {
  const Stats *x = *(const Stats *const *)a, *y = *(const Stats *const *)b;
  if (x->cpu_us != y->cpu_us)
    return x->cpu_us > y->cpu_us ? -1 : 1;
  return strcmp(x->name, y->name);
}

static void print_table (void) {
  const Stats *rows[MAX_PLUGINS];
  int i;
  for (i = 0; i < H.nplugins; i++)
    rows[i] = &H.plugins[i].pm;
  snprintf(H.process.name, sizeof(H.process.name), "(whole editor)");
  qsort(rows, (size_t)H.nplugins, sizeof(rows[0]), by_cpu);
  printf("\nabout:performance -- %d events (%d keystrokes, %d cursor moves, "
         "%d saves), %.2f s of wall time, %.0f ms of CPU\n",
         H.ninputs, H.ncounts[KEY], H.ncounts[CURSOR], H.ncounts[SAVE],
         (double)H.time_us / 1e6, (double)H.process.cpu_us / 1000);
  printf("%-16s %9s %7s %6s %11s %9s  %-10s %s\n", "plugin", "cpu ms", "share",
         "ticks", "blocking ms", "alloc KB", "longest",
         "jank histogram (ms:events)");
  for (i = 0; i < H.nplugins; i++)
    print_row(rows[i]);
  print_row(&H.process);
}

/* }====================================================== */

/* Runs f in protected mode; a Lua error there ends the program. */
static void protect (lua_State *L, lua_CFunction f, const char *what) {
  lua_pushcfunction(L, f);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK)
    die(what, lua_tostring(L, -1));
}

int main (int argc, char **argv) {
  lua_State *L;
  char names[MAX_PLUGINS * 66] = "", status[MAX_PLUGINS * 130] = "";
  char backup[sizeof(H.path) + 4];
  int fd, i;

  H.root = argc > 1 ? argv[1] : ".";
  if (argc > 2) {
    fprintf(stderr, "usage: perfmon-editor [ROOT]\n");
    return 2;
  }
  snprintf(H.path, sizeof(H.path), "/tmp/perfmon-editor-XXXXXX");
  if ((fd = mkstemp(H.path)) < 0)
    die("mkstemp", strerror(errno));
  close(fd);
  snprintf(backup, sizeof(backup), "%s.bak", H.path);
  insert_line(0, dup_range("", 0));
  B.line = B.col = 1;

  L = luaL_newstate();
  if (L == NULL)
    die("luaL_newstate", "not enough memory");
  luaL_openlibs(L);
  protect(L, setup, "setup");
  for (i = 0; i < H.nplugins; i++)
    snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
             i > 0 ? ", " : "", H.plugins[i].name);
  printf("editor (C): %d plugins (%s), each in its own sandbox and group; "
         "replaying %d inputs\n",
         H.nplugins, names, H.ninputs);
  fflush(stdout);

  protect(L, replay, "replay");
  protect(L, report, "report");

  for (i = 0; i < H.nplugins; i++)
    if (H.plugins[i].status[0] != '\0')
      snprintf(status + strlen(status), sizeof(status) - strlen(status), "%s%s",
               status[0] != '\0' ? " | " : "", H.plugins[i].status);
  printf("editor (C): session over, document saved %d times; status bar: %s\n",
         H.saves, status);
  print_table();

  lua_close(L);
  buffer_free();
  free(H.inputs);
  remove(H.path);
  remove(backup);
  return EXIT_SUCCESS;
}
