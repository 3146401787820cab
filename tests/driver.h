/*
** driver.h -- what the reliability drivers of tests/ share.
**
** Each driver embeds Lua and perfmon: perfmon's sources are compiled into
** the program (with the driver's sanitizer flags), luaopen_perfmon_core is
** registered in package.preload, and perfmon's Lua modules and the specs'
** Lua support files are found from the repository root given on the command
** line.  Every lua_State a driver makes runs on a counting allocator, so
** that a leak shows as bytes still alive after lua_close.
*/
#ifndef REL_DRIVER_H
#define REL_DRIVER_H

#include <stddef.h>

#include <lua.h>

/* The allocator of one lua_State: counts what is alive and can fail. */
typedef struct rel_Alloc {
  size_t live; /* bytes allocated and not yet freed */
  long allocs; /* allocations (and growths) so far */
  long fail_at; /* the allocation number that fails; 0: none */
  int sticky; /* every allocation from fail_at on fails too */
  long failed; /* allocations refused so far */
} rel_Alloc;

/* A new state on allocator a (zeroed by the caller or not: it is reset),
** with the standard libraries, perfmon preloaded and the paths set.
** Exits the program when the state cannot be made. */
lua_State *rel_newstate (rel_Alloc *a, const char *root);

/* Calls the function below the nargs arguments on the top of the stack
** under a traceback, discarding its results; returns the lua_pcall status
** and leaves the error message (or nothing) on the stack. */
int rel_pcall (lua_State *L, int nargs);

/* Loads a Lua file of the repository (relative to root); lua_load's
** status, the function or the message on the stack. */
int rel_loadfile (lua_State *L, const char *root, const char *file);

/* Loads a file, then calls it with the string arguments args[0..nargs-1]
** like rel_pcall. */
int rel_runfile (lua_State *L, const char *root, const char *file, int nargs,
                 const char *const *args);

/* Runs the chunk src named name like rel_pcall. */
int rel_run (lua_State *L, const char *name, const char *src);

/* Prints "driver: message" and exits with 1. */
void rel_die (const char *fmt, ...);

/* lua_close, then the leak check: returns the bytes still allocated (and
** says so on stderr), 0 when every byte went back. */
size_t rel_close (lua_State *L, rel_Alloc *a, const char *what);

#endif
