"""The admin form for models whose validation names fields some editors see read-only."""

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, FieldDoesNotExist, ValidationError
from django.utils.text import capfirst


class AdminModelForm(forms.ModelForm):
    """A ModelForm whose model errors on fields it does not show become errors of the whole form.

    A model's clean() may reject a value the editor cannot change (a read-only field for this user, or one
    whose allowed values changed since it was saved). The stock ModelForm raises ValueError for an error on
    a field it lacks, a server error; here the editor reads it, named after its field, and nothing is saved.
    """

    def add_error(self, field, error):
        if not isinstance(error, ValidationError):
            error = ValidationError(error)
        if hasattr(error, "error_dict"):
            if field is not None:
                super().add_error(field, error)  # the stock TypeError: a dict belongs to no one field
            by_field = error.error_dict
        else:
            by_field = {field or NON_FIELD_ERRORS: error.error_list}
        for name, errors in by_field.items():
            if name == NON_FIELD_ERRORS or name in self.fields:
                super().add_error(None if name == NON_FIELD_ERRORS else name, errors)
            else:
                label = self._label(name)
                labelled = [ValidationError(f"{label}: {text}", code=item.code) for item in errors for text in item]
                super().add_error(None, labelled)

    def _label(self, name: str) -> str:
        try:
            return capfirst(self._meta.model._meta.get_field(name).verbose_name)
        except FieldDoesNotExist:
            return name
