"""The Django app: add ``"herenow.django"`` to ``INSTALLED_APPS`` for the
template tags (``{% load herenow %}``) and the ``whos_online`` template."""

from __future__ import annotations

from django.apps import AppConfig


class HerenowConfig(AppConfig):
    """herenow's Django app (label ``herenow``)."""

    name = "herenow.django"
    label = "herenow"
    verbose_name = "herenow presence"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from . import conf

        setting_changed.connect(conf.on_setting_changed, dispatch_uid="herenow-settings")
