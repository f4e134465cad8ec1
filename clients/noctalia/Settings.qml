// The plugin's settings: which `utter` to run, and whether the icon hides while idle.
import QtQuick
import QtQuick.Layouts
import qs.Commons
import qs.Widgets

ColumnLayout {
    id: root

    property var pluginApi: null
    spacing: Style.marginM

    property string editCommand:
        pluginApi?.pluginSettings?.utterCommand ??
        pluginApi?.manifest?.metadata?.defaultSettings?.utterCommand ??
        "utter"
    property bool editHideWhenIdle:
        pluginApi?.pluginSettings?.hideWhenIdle ??
        pluginApi?.manifest?.metadata?.defaultSettings?.hideWhenIdle ??
        false

    NTextInput {
        label: "utter command"
        description: "The utter binary to run (a name on PATH or an absolute path)."
        text: root.editCommand
        onTextChanged: root.editCommand = text
        Layout.fillWidth: true
    }

    NToggle {
        label: "Hide while idle"
        description: "Show the icon only while Utter listens, transcribes, waits for you or has a problem."
        checked: root.editHideWhenIdle
        onToggled: checked => root.editHideWhenIdle = checked
    }

    // Called by Noctalia's settings dialog when the person saves.
    function saveSettings() {
        if (!pluginApi)
            return;
        pluginApi.pluginSettings.utterCommand = root.editCommand.trim() === "" ? "utter" : root.editCommand.trim();
        pluginApi.pluginSettings.hideWhenIdle = root.editHideWhenIdle;
        pluginApi.saveSettings();
    }
}
