// The panel: what was heard last, how the command went, and every confirmation the runner
// waits for, each with Approve and Deny (`utter confirm ID yes|no`).
import QtQuick
import QtQuick.Layouts
import qs.Commons
import qs.Widgets

Item {
    id: root

    property var pluginApi: null
    readonly property var main: pluginApi?.mainInstance ?? null
    readonly property var state: main ? main.state : null

    property real contentPreferredWidth: 380 * Style.uiScaleRatio
    property real contentPreferredHeight: column.implicitHeight + Style.marginL * 2

    ColumnLayout {
        id: column
        anchors.fill: parent
        anchors.margins: Style.marginL
        spacing: Style.marginM

        NText {
            text: root.main ? root.main.description : "Utter is not running"
            pointSize: Style.fontSizeL
            font.weight: Style.fontWeightBold
            color: Color.mOnSurface
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        NText {
            visible: !!root.state && root.state.lastTranscript !== ""
            text: root.state ? "Heard: “" + root.state.lastTranscript + "”" : ""
            color: Color.mOnSurface
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        NText {
            // The mode: while dictating, what is heard is typed.
            visible: !!root.state && root.state.dictation
            text: "Dictation: what you say is typed. Say “stop dictation” to end it."
            color: Color.mPrimary
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        NText {
            // What "undo that" would reverse (the runner's journal).
            visible: !!root.state && root.state.undoable !== ""
            text: root.state ? "Say “undo that” to undo “" + root.state.undoable + "”" : ""
            color: Color.mOnSurfaceVariant
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        NText {
            visible: !!root.state && root.state.lastResult !== null
            text: root.state && root.state.lastResult ? root.state.lastResult.text : ""
            color: root.state && root.state.lastResult && !root.state.lastResult.ok ? Color.mError : Color.mOnSurfaceVariant
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        Repeater {
            model: root.state ? root.state.pending : []
            delegate: ColumnLayout {
                required property var modelData
                Layout.fillWidth: true
                spacing: Style.marginS

                NText {
                    text: modelData.summary
                    color: Color.mOnSurface
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    spacing: Style.marginS
                    NButton {
                        text: "Approve"
                        icon: "check"
                        onClicked: root.main.answer(modelData.id, true)
                    }
                    NButton {
                        text: "Deny"
                        icon: "x"
                        onClicked: root.main.answer(modelData.id, false)
                    }
                }
            }
        }

        NText {
            visible: !!root.main && root.main.actionError !== ""
            text: root.main ? root.main.actionError : ""
            color: Color.mError
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        NButton {
            text: root.state && root.state.listening ? "Stop listening" : "Talk"
            icon: "microphone"
            enabled: !!root.state && root.state.connected
            onClicked: root.main.togglePushToTalk()
        }
    }
}
