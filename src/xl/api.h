/*
** xl/api.h -- the Lua API through one table, for perfmon's native build
** for Lite XL (xl/api.c fills it).
**
** Lite XL's release builds link Lua statically and export none of it, so
** a usual C module, which takes lua_* from the host at load time, cannot
** load there.  Lite XL's native-plugin loader hands an entry point
** luaopen_lite_xl_NAME(L, XL) the function XL, which gives the address of
** each Lua API function by name.  The native build compiles the same
** sources with this header included where they include Lua's
** (xl/include/): after lua.h and lauxlib.h have declared the API, each
** function perfmon calls is renamed to its slot in pm_xl, so a call is one
** indirect call, as through a PLT.
** The build links with -z defs: a function used here and missing from the
** list below fails the link, not the user's editor.
*/
#ifndef PM_XL_API_H
#define PM_XL_API_H

#include <lua.h>
#include <lauxlib.h>

/* Every Lua API function perfmon's C core calls. */
#define PM_XL_FUNCTIONS(X)                                                     \
  X(luaL_addstring)                                                            \
  X(luaL_argerror)                                                             \
  X(luaL_buffinit)                                                             \
  X(luaL_checkany)                                                             \
  X(luaL_checkinteger)                                                         \
  X(luaL_checklstring)                                                         \
  X(luaL_checknumber)                                                          \
  X(luaL_checkstack)                                                           \
  X(luaL_checktype)                                                            \
  X(luaL_checkudata)                                                           \
  X(luaL_checkversion_)                                                        \
  X(luaL_error)                                                                \
  X(luaL_getmetafield)                                                         \
  X(luaL_getsubtable)                                                          \
  X(luaL_loadstring)                                                           \
  X(luaL_newmetatable)                                                         \
  X(luaL_optinteger)                                                           \
  X(luaL_prepbuffsize)                                                         \
  X(luaL_pushresult)                                                           \
  X(luaL_setfuncs)                                                             \
  X(luaL_setmetatable)                                                         \
  X(luaL_testudata)                                                            \
  X(luaL_tolstring)                                                            \
  X(luaL_typeerror)                                                            \
  X(luaL_where)                                                                \
  X(lua_absindex)                                                              \
  X(lua_callk)                                                                 \
  X(lua_checkstack)                                                            \
  X(lua_concat)                                                                \
  X(lua_createtable)                                                           \
  X(lua_error)                                                                 \
  X(lua_gc)                                                                    \
  X(lua_getallocf)                                                             \
  X(lua_getfield)                                                              \
  X(lua_gethook)                                                               \
  X(lua_gethookcount)                                                          \
  X(lua_gethookmask)                                                           \
  X(lua_geti)                                                                  \
  X(lua_getinfo)                                                               \
  X(lua_getiuservalue)                                                         \
  X(lua_getlocal)                                                              \
  X(lua_getstack)                                                              \
  X(lua_gettop)                                                                \
  X(lua_getupvalue)                                                            \
  X(lua_iscfunction)                                                           \
  X(lua_isinteger)                                                             \
  X(lua_isnumber)                                                              \
  X(lua_isstring)                                                              \
  X(lua_newthread)                                                             \
  X(lua_newuserdatauv)                                                         \
  X(lua_next)                                                                  \
  X(lua_pcallk)                                                                \
  X(lua_pushboolean)                                                           \
  X(lua_pushcclosure)                                                          \
  X(lua_pushfstring)                                                           \
  X(lua_pushinteger)                                                           \
  X(lua_pushlightuserdata)                                                     \
  X(lua_pushlstring)                                                           \
  X(lua_pushnil)                                                               \
  X(lua_pushnumber)                                                            \
  X(lua_pushstring)                                                            \
  X(lua_pushthread)                                                            \
  X(lua_pushvalue)                                                             \
  X(lua_rawequal)                                                              \
  X(lua_rawget)                                                                \
  X(lua_rawgeti)                                                               \
  X(lua_rawgetp)                                                               \
  X(lua_rawlen)                                                                \
  X(lua_rawset)                                                                \
  X(lua_rawseti)                                                               \
  X(lua_rawsetp)                                                               \
  X(lua_resetthread)                                                           \
  X(lua_resume)                                                                \
  X(lua_rotate)                                                                \
  X(lua_setallocf)                                                             \
  X(lua_setfield)                                                              \
  X(lua_sethook)                                                               \
  X(lua_setiuservalue)                                                         \
  X(lua_setmetatable)                                                          \
  X(lua_settop)                                                                \
  X(lua_setupvalue)                                                            \
  X(lua_status)                                                                \
  X(lua_toboolean)                                                             \
  X(lua_tocfunction)                                                           \
  X(lua_toclose)                                                               \
  X(lua_tointegerx)                                                            \
  X(lua_tolstring)                                                             \
  X(lua_tonumberx)                                                             \
  X(lua_topointer)                                                             \
  X(lua_tothread)                                                              \
  X(lua_touserdata)                                                            \
  X(lua_type)                                                                  \
  X(lua_typename)                                                              \
  X(lua_upvalueid)                                                             \
  X(lua_upvaluejoin)                                                           \
  X(lua_xmove)

typedef struct pm_XLApi {
#define PM_XL_SLOT(f) __typeof__(f) *f;
  PM_XL_FUNCTIONS(PM_XL_SLOT)
#undef PM_XL_SLOT
} pm_XLApi;

extern pm_XLApi pm_xl;

/* Fills pm_xl through resolve (Lite XL's XL), all or nothing; returns
** NULL, or the name of the first function resolve did not give. */
const char *pm_xl_fill (void *(*resolve)(const char *name));

/* The renaming, one line a function, in the list's order; xl/api.c, which
** fills the table, names the slots itself. */
#ifndef PM_XL_NO_RENAME
#define luaL_addstring (pm_xl.luaL_addstring)
#define luaL_argerror (pm_xl.luaL_argerror)
#define luaL_buffinit (pm_xl.luaL_buffinit)
#define luaL_checkany (pm_xl.luaL_checkany)
#define luaL_checkinteger (pm_xl.luaL_checkinteger)
#define luaL_checklstring (pm_xl.luaL_checklstring)
#define luaL_checknumber (pm_xl.luaL_checknumber)
#define luaL_checkstack (pm_xl.luaL_checkstack)
#define luaL_checktype (pm_xl.luaL_checktype)
#define luaL_checkudata (pm_xl.luaL_checkudata)
#define luaL_checkversion_ (pm_xl.luaL_checkversion_)
#define luaL_error (pm_xl.luaL_error)
#define luaL_getmetafield (pm_xl.luaL_getmetafield)
#define luaL_getsubtable (pm_xl.luaL_getsubtable)
#define luaL_loadstring (pm_xl.luaL_loadstring)
#define luaL_newmetatable (pm_xl.luaL_newmetatable)
#define luaL_optinteger (pm_xl.luaL_optinteger)
#define luaL_prepbuffsize (pm_xl.luaL_prepbuffsize)
#define luaL_pushresult (pm_xl.luaL_pushresult)
#define luaL_setfuncs (pm_xl.luaL_setfuncs)
#define luaL_setmetatable (pm_xl.luaL_setmetatable)
#define luaL_testudata (pm_xl.luaL_testudata)
#define luaL_tolstring (pm_xl.luaL_tolstring)
#define luaL_typeerror (pm_xl.luaL_typeerror)
#define luaL_where (pm_xl.luaL_where)
#define lua_absindex (pm_xl.lua_absindex)
#define lua_callk (pm_xl.lua_callk)
#define lua_checkstack (pm_xl.lua_checkstack)
#define lua_concat (pm_xl.lua_concat)
#define lua_createtable (pm_xl.lua_createtable)
#define lua_error (pm_xl.lua_error)
#define lua_gc (pm_xl.lua_gc)
#define lua_getallocf (pm_xl.lua_getallocf)
#define lua_getfield (pm_xl.lua_getfield)
#define lua_gethook (pm_xl.lua_gethook)
#define lua_gethookcount (pm_xl.lua_gethookcount)
#define lua_gethookmask (pm_xl.lua_gethookmask)
#define lua_geti (pm_xl.lua_geti)
#define lua_getinfo (pm_xl.lua_getinfo)
#define lua_getiuservalue (pm_xl.lua_getiuservalue)
#define lua_getlocal (pm_xl.lua_getlocal)
#define lua_getstack (pm_xl.lua_getstack)
#define lua_gettop (pm_xl.lua_gettop)
#define lua_getupvalue (pm_xl.lua_getupvalue)
#define lua_iscfunction (pm_xl.lua_iscfunction)
#define lua_isinteger (pm_xl.lua_isinteger)
#define lua_isnumber (pm_xl.lua_isnumber)
#define lua_isstring (pm_xl.lua_isstring)
#define lua_newthread (pm_xl.lua_newthread)
#define lua_newuserdatauv (pm_xl.lua_newuserdatauv)
#define lua_next (pm_xl.lua_next)
#define lua_pcallk (pm_xl.lua_pcallk)
#define lua_pushboolean (pm_xl.lua_pushboolean)
#define lua_pushcclosure (pm_xl.lua_pushcclosure)
#define lua_pushfstring (pm_xl.lua_pushfstring)
#define lua_pushinteger (pm_xl.lua_pushinteger)
#define lua_pushlightuserdata (pm_xl.lua_pushlightuserdata)
#define lua_pushlstring (pm_xl.lua_pushlstring)
#define lua_pushnil (pm_xl.lua_pushnil)
#define lua_pushnumber (pm_xl.lua_pushnumber)
#define lua_pushstring (pm_xl.lua_pushstring)
#define lua_pushthread (pm_xl.lua_pushthread)
#define lua_pushvalue (pm_xl.lua_pushvalue)
#define lua_rawequal (pm_xl.lua_rawequal)
#define lua_rawget (pm_xl.lua_rawget)
#define lua_rawgeti (pm_xl.lua_rawgeti)
#define lua_rawgetp (pm_xl.lua_rawgetp)
#define lua_rawlen (pm_xl.lua_rawlen)
#define lua_rawset (pm_xl.lua_rawset)
#define lua_rawseti (pm_xl.lua_rawseti)
#define lua_rawsetp (pm_xl.lua_rawsetp)
#define lua_resetthread (pm_xl.lua_resetthread)
#define lua_resume (pm_xl.lua_resume)
#define lua_rotate (pm_xl.lua_rotate)
#define lua_setallocf (pm_xl.lua_setallocf)
#define lua_setfield (pm_xl.lua_setfield)
#define lua_sethook (pm_xl.lua_sethook)
#define lua_setiuservalue (pm_xl.lua_setiuservalue)
#define lua_setmetatable (pm_xl.lua_setmetatable)
#define lua_settop (pm_xl.lua_settop)
#define lua_setupvalue (pm_xl.lua_setupvalue)
#define lua_status (pm_xl.lua_status)
#define lua_toboolean (pm_xl.lua_toboolean)
#define lua_tocfunction (pm_xl.lua_tocfunction)
#define lua_toclose (pm_xl.lua_toclose)
#define lua_tointegerx (pm_xl.lua_tointegerx)
#define lua_tolstring (pm_xl.lua_tolstring)
#define lua_tonumberx (pm_xl.lua_tonumberx)
#define lua_topointer (pm_xl.lua_topointer)
#define lua_tothread (pm_xl.lua_tothread)
#define lua_touserdata (pm_xl.lua_touserdata)
#define lua_type (pm_xl.lua_type)
#define lua_typename (pm_xl.lua_typename)
#define lua_upvalueid (pm_xl.lua_upvalueid)
#define lua_upvaluejoin (pm_xl.lua_upvaluejoin)
#define lua_xmove (pm_xl.lua_xmove)

#endif

#endif
