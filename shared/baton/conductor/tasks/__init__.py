"""One translator module per Conductor task type (Conductor task ⇄ Baton step), registered in
:mod:`baton.conductor.tasks.dispatch`; :mod:`baton.conductor.tasks.common` holds what they share.
The workflow-level translation is :mod:`baton.conductor.definitions`."""
