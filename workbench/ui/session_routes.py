"""The two HTTP routes behind the password sign-in's cookie (served by ``workbench app``
through :mod:`workbench.ui.launcher`, Streamlit's ``st.App`` with extra routes).

A page session talks to the browser over a WebSocket and cannot set an HttpOnly cookie, so a
successful sign-in hands its signed token (:mod:`workbench.services.sessions`) to a one-time
ticket and sends the browser to ``/_workbench/session?ticket=...&next=PATH``; that route sets
the cookie and sends the browser back to ``PATH``, where the new page session reads the cookie
(``st.context.cookies``). ``/_workbench/sign-out`` clears the cookie.

The cookie: HttpOnly (no script of the page can read it), ``SameSite=Lax``, ``Path=/``,
``Max-Age`` the token's remaining lifetime, ``Secure`` when the browser reached the app over
HTTPS (the request's scheme, or ``X-Forwarded-Proto: https`` from a TLS proxy in front).
A ticket is good only from the browser it was made for: it is bound to the token of
Streamlit's ``_streamlit_xsrf`` cookie, which another browser does not have (so a link with
someone else's ticket cannot sign a victim in as that someone).
"""

from __future__ import annotations

from workbench import lazylibs
from workbench.services import sessions

SIGN_IN_PATH = "/_workbench/session"
SIGN_OUT_PATH = "/_workbench/sign-out"
XSRF_COOKIE = "_streamlit_xsrf"
#: whether this process serves the routes (set by the launcher); a page run by a bare
#: ``streamlit run app.py`` or by AppTest keeps the sign-in in its page session only
SERVED = [False]


def cookie_name() -> str:
    """The session cookie's name, with the port the app serves on: cookies are shared by every
    port of a host, so two apps on one machine must not overwrite each other's sign-in."""
    from streamlit import config

    return f"workbench_session_{config.get_option('server.port')}"


def safe_next(target: str | None) -> str:
    """``target`` when it is a path on this site (one leading ``/``, not ``//`` or ``/\\``, no
    scheme), else ``/``: the route must not send a browser to another site."""
    target = str(target or "")
    if not target.startswith("/") or target.startswith(("//", "/\\")) or any(c in target for c in "\r\n\\"):
        return "/"
    return target


def _secure(request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def _sign_in(request):
    response = lazylibs.starlette_responses.RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    response.headers["Cache-Control"] = "no-store"
    found = sessions.TICKETS.redeem(request.query_params.get("ticket"),
                                    sessions.xsrf_binding(request.cookies.get(XSRF_COOKIE)))
    if found is not None:  # an unknown, used or foreign ticket: back to the page, not signed in
        token, max_age = found
        response.set_cookie(cookie_name(), token, max_age=max(1, int(max_age)), path="/", httponly=True,
                            samesite="lax", secure=_secure(request))
    return response


async def _sign_out(request):
    response = lazylibs.starlette_responses.RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    response.headers["Cache-Control"] = "no-store"
    response.delete_cookie(cookie_name(), path="/", httponly=True, samesite="lax", secure=_secure(request))
    return response


def routes() -> list:
    """The routes to serve beside Streamlit's own."""

    return [lazylibs.starlette_routing.Route(SIGN_IN_PATH, _sign_in, methods=["GET"]), lazylibs.starlette_routing.Route(SIGN_OUT_PATH, _sign_out, methods=["GET"])]
