"""Django integration: middleware that heartbeats each request's user or
guest (:mod:`herenow.django.middleware`), template tags for "who's online"
and "last seen" (``{% load herenow %}``), and a context processor
(:mod:`herenow.django.context_processors`).

Install with the ``django`` extra, add ``"herenow.django"`` to
``INSTALLED_APPS`` and the middleware after ``AuthenticationMiddleware``;
configure with ``settings.HERENOW`` (see :mod:`herenow.django.conf`).
"""
