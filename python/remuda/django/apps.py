"""The Django app: binds ``settings.REMUDA_APP`` to Django's database when Django starts."""

from __future__ import annotations

from django.apps import AppConfig


class RemudaConfig(AppConfig):
    name = "remuda.django"
    label = "remuda"
    verbose_name = "remuda"

    def ready(self) -> None:
        from . import bind

        bind()
