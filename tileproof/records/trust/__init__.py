"""Trust at the records floor: signed envelopes (``signing``), the runner registry and ``verify``
(``runner_keys``), a registry change's endorsement (``registry_change``), the trust pin
(``trust_pin``) and what git history says about time and trust (``trust_history``), as plain data."""
