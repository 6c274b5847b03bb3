"""Every dashboard form drawn with the theme's widgets: a field Django gives a plain widget (a
form's own CharField, URLField, a password, a checkbox list) gets django-unfold's, so it has a
box, and a button looks like a button. django-unfold styles only the model fields of a
ModelAdmin's form; a form of our own (the login, the invitation, a confirmation) is styled here
(`ThemedForm`, `themed(form_class)`), one way for all of them."""

from django import forms
from django.contrib.auth.forms import SetPasswordForm
from unfold import widgets as unfold_widgets

# A plain Django widget and the theme's widget that draws it.
THEMED_WIDGETS: dict[type[forms.Widget], type[forms.Widget]] = {
    forms.TextInput: unfold_widgets.UnfoldAdminTextInputWidget,
    forms.URLInput: unfold_widgets.UnfoldAdminURLInputWidget,
    forms.EmailInput: unfold_widgets.UnfoldAdminEmailInputWidget,
    forms.NumberInput: unfold_widgets.UnfoldAdminIntegerFieldWidget,
    forms.PasswordInput: unfold_widgets.UnfoldAdminPasswordWidget,
    forms.Textarea: unfold_widgets.UnfoldAdminTextareaWidget,
    forms.Select: unfold_widgets.UnfoldAdminSelectWidget,
    forms.CheckboxInput: unfold_widgets.UnfoldBooleanWidget,
    forms.CheckboxSelectMultiple: unfold_widgets.UnfoldAdminCheckboxSelectMultipleWidget,
}
# Inputs with no themed class of their own (a date picker): the theme's input classes.
INPUT_CLASSES = " ".join(unfold_widgets.INPUT_CLASSES)


def theme_widget(widget: forms.Widget) -> forms.Widget:
    """The theme's widget for a plain Django one, with its attributes and choices; any other
    widget (already the theme's, or hidden) as it is."""
    themed = THEMED_WIDGETS.get(type(widget))
    if themed is not None:
        attrs = {k: v for k, v in widget.attrs.items() if k != "class"}
        new = themed(attrs=attrs)
        if hasattr(widget, "choices"):
            new.choices = widget.choices
        if isinstance(widget, forms.PasswordInput):
            new.render_value = widget.render_value
        new.is_required = widget.is_required
        return new
    if isinstance(widget, forms.DateInput) and not widget.attrs.get("class"):
        widget.attrs["class"] = INPUT_CLASSES
    return widget


class ThemedForm:
    """Put first in a form's bases: `class RotateForm(ThemedForm, forms.Form)`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.widget = theme_widget(field.widget)


def themed(form_class: type[forms.BaseForm]) -> type[forms.BaseForm]:
    """form_class with ThemedForm first (a ModelAdmin's form, built by the admin)."""
    if issubclass(form_class, ThemedForm):
        return form_class
    return type(form_class)(form_class.__name__, (ThemedForm, form_class), {})


class ThemedSetPasswordForm(ThemedForm, SetPasswordForm):
    """The invited teammate's "choose your password"."""
