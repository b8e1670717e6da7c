"""The project system the service writes tickets into: the interface and the Procore client."""
from services.project_system.base import (
    Attachment,
    BudgetCode,
    ChangeEventDraft,
    ChangeEventLine,
    CostCode,
    CostType,
    ManpowerDraft,
    ProjectSystem,
    ProjectSystemAuthError,
    ProjectSystemError,
    ProjectSystemUnavailable,
    RemoteProject,
    RemoteRecord,
    ToolDisabled,
    WriteUnconfirmed,
)
from services.project_system.procore import ProcoreClient

__all__ = [
    "Attachment",
    "BudgetCode",
    "ChangeEventDraft",
    "ChangeEventLine",
    "CostCode",
    "CostType",
    "ManpowerDraft",
    "ProcoreClient",
    "ProjectSystem",
    "ProjectSystemAuthError",
    "ProjectSystemError",
    "ProjectSystemUnavailable",
    "RemoteProject",
    "RemoteRecord",
    "ToolDisabled",
    "WriteUnconfirmed",
]
