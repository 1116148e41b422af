"""The base of every typed configuration model: unknown keys are errors, assignments validated."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
