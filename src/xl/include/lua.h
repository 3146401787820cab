/*
** xl/include/lua.h -- Lua's lua.h for the native build: the real one, then
** the renaming of the Lua API to pm_xl's slots (xl/api.h).  On the native
** build's include path before Lua's own, so that a source gets the
** renaming where it includes Lua, after its own feature macros.
*/
#ifndef PM_XL_LUA_H
#define PM_XL_LUA_H

#include_next <lua.h>
#include "../api.h"

#endif
