"""Composition root: builds the domain objects from settings, once per process, on first use."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.org_recount import OrgRecounter
from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.replay import Replayer
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects
from hybrid_counter.governance.thresholds import Thresholds, ThresholdWatcher
from hybrid_counter.healing import Healer
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings


@dataclass
class Components:
    settings: Settings
    clients: Clients
    obs: Observability
    effects: Effects = field(default_factory=Effects)

    @classmethod
    def from_env(cls) -> Components:
        return cls(Settings.from_env(), Clients(), default_observability())

    @cached_property
    def resources(self) -> ResourceService:
        return ResourceService(self.settings, self.clients, self.obs, self.effects)

    @cached_property
    def eventual(self) -> EventualCounter:
        clock = self.effects.clock
        requests = RecountRequests(self.settings.table_name, self.clients, clock)
        return EventualCounter(
            self.settings.table_name,
            self.settings.counting_mode,
            self.clients,
            self.obs,
            requests=requests,
            clock=clock,
            grace_seconds=self.settings.pending_grace_seconds,
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(
            self.settings.table_name,
            self.eventual,
            self.settings.pending_grace_seconds,
            self.clients,
            clock=self.effects.clock,
            recounter=self.recounter,
            obs=self.obs,
            changes=self.resources.changes,
            org_recounter=self.org_recounter,
        )

    @cached_property
    def watcher(self) -> ThresholdWatcher:
        """The stream path's judge of threshold crossings (its plan cache lives with it)."""
        settings = self.settings
        return ThresholdWatcher(
            settings.table_name,
            Thresholds(settings.usage_thresholds, settings.threshold_hysteresis_percent),
            limits=self.resources.limits,
            changes=self.resources.changes,
            clients=self.clients,
            obs=self.obs,
            enabled=settings.event_bus_name is not None,
            clock=self.effects.clock,
        )

    @cached_property
    def replayer(self) -> Replayer:
        return Replayer(self.eventual, self.sweeper, self.clients, watcher=self.watcher)

    @cached_property
    def healer(self) -> Healer:
        return Healer(self.settings.table_name, self.clients, self.obs)

    @cached_property
    def recounter(self) -> Recounter:
        return Recounter(
            self.settings.table_name,
            self.resources.counters,
            self.eventual,
            self.healer,
            self.clients,
            grace_seconds=self.settings.pending_grace_seconds,
            clock=self.effects.clock,
            repairs=self.resources.repairs,
            obs=self.obs,
        )

    @cached_property
    def org_recounter(self) -> OrgRecounter:
        return OrgRecounter(
            self.settings.table_name,
            self.clients,
            self.resources.org_store,
            self.resources.repairs,
            self.eventual,
            grace_seconds=self.settings.pending_grace_seconds,
            clock=self.effects.clock,
        )
